// The primitives of mx.distributed's collectives over a group of more than
// one process (fluxion/distributed.h has the ops). Each holds its Group; the
// kernels call the group's communicator: the CPU kernels
// (backend/cpu/distributed.cpp) for MPI, the GPU kernels
// (backend/cuda/distributed.cpp) for NCCL.
#pragma once

#include "fluxion/distributed.h"
#include "fluxion/distributed_comm.h"
#include "fluxion/primitive.h"

namespace fluxion::distributed {

class DistPrimitive : public Primitive {
 public:
  DistPrimitive(Stream s, Group g) : Primitive(s), group_(std::move(g)) {}
  const Group& group() const { return group_; }

 protected:
  Group group_;
};

// all_sum / all_max / all_min.
class AllReduce : public DistPrimitive {
 public:
  AllReduce(Stream s, Group g, detail::ReduceOp op)
      : DistPrimitive(s, std::move(g)), op_(op) {}
  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_RULES
  const char* name() const override { return "AllReduce"; }
  const char* op_name() const;  // "all_sum"...
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }

 private:
  detail::ReduceOp op_;
};

class AllGather : public DistPrimitive {
 public:
  using DistPrimitive::DistPrimitive;
  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_RULES
  const char* name() const override { return "AllGather"; }
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
};

// sum_scatter.
class ReduceScatter : public DistPrimitive {
 public:
  using DistPrimitive::DistPrimitive;
  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_RULES
  const char* name() const override { return "ReduceScatter"; }
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
};

// Point-to-point transfers are never merged by compile (is_equivalent is
// false): each one is a message the peer waits for. Gradients do not flow
// through them (MLX's rule too): the peer's cotangent would need a transfer
// the peer never asked for.
class Send : public DistPrimitive {
 public:
  Send(Stream s, Group g, int dst)
      : DistPrimitive(s, std::move(g)), dst_(dst) {}
  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_VMAP
  const char* name() const override { return "Send"; }
  bool is_equivalent(const Primitive&) const override { return false; }
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }

 private:
  int dst_;
};

class Recv : public DistPrimitive {
 public:
  Recv(Stream s, Group g, int src)
      : DistPrimitive(s, std::move(g)), src_(src) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Recv"; }
  bool is_equivalent(const Primitive&) const override { return false; }
  bool shapeless_ok() const override { return false; }

 private:
  int src_;
};

}  // namespace fluxion::distributed
