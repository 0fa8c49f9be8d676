// mx.distributed's collectives and point-to-point ops (fluxion/distributed.h)
// and the transformation rules of their primitives (fluxion/ops/distributed.h).
//
// Over a group of one process (the singleton group, or a split of one) the
// collectives return their input itself, as MLX: no node, so gradients and
// transformations pass through (a NCCL group of one excepted: see elided).
// Over more, each op is a node evaluated on a stream of the transport's
// device (MPI: a CPU stream; NCCL: a GPU stream). Gradients treat the loss as the sum of every process's loss
// (data parallelism): the cotangent of all_sum is the all_sum of the
// cotangents, of all_gather this process's slice of it.
#include "fluxion/ops/distributed.h"

#include <stdexcept>
#include <string>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/rule_helpers.h"
#include "fluxion/ops/shape.h"

namespace fluxion::distributed {

namespace {

using Arrays = std::vector<array>;
using Batched = std::pair<std::vector<array>, std::vector<int>>;

const char* p_name(detail::ReduceOp op) {
  switch (op) {
    case detail::ReduceOp::sum:
      return "all_sum";
    case detail::ReduceOp::max:
      return "all_max";
    default:
      return "all_min";
  }
}

Group resolve(const std::optional<Group>& g) { return g ? *g : init(); }

// The stream the op runs on: one of the device the group's transport moves
// memory on (MPI: the cpu; NCCL: its gpu); by default that device's default
// stream.
Stream comm_stream(const char* op, StreamOrDevice s, const Group& g) {
  Device d = g.comm() ? g.comm()->device() : Device{Device::cpu};
  Stream st = s.kind == StreamOrDevice::Kind::none ? default_stream(d)
                                                   : to_stream(s);
  if (st.device != d) {
    bool gpu = d.type == Device::gpu;
    throw std::invalid_argument(
        std::string("[") + op + "] The " + (gpu ? "NCCL" : "MPI") +
        " backend communicates from " +
        (gpu ? "the memory of gpu " + std::to_string(d.index) + ": use a stream of that gpu"
             : std::string("host memory: use a cpu stream")) +
        " (got a " + (st.device.type == Device::gpu ? "gpu" : "cpu") +
        " stream).");
  }
  return st;
}

// Whether an op over `g` is the identity: over the singleton group, or a
// host transport's group of one (MLX). A NCCL group of one still runs its
// collectives (they are device copies then): the GPU path is the same at
// every size, and its kernels run on a machine with one GPU.
bool elided(const Group& g) {
  return g.size() == 1 &&
         !(g.comm() && g.comm()->device().type == Device::gpu);
}

void check_peer(const char* op, const char* what, int peer, const Group& g) {
  if (peer < 0 || peer >= g.size()) {
    throw std::invalid_argument(std::string("[") + op + "] Invalid rank " +
                                std::to_string(peer) + " for a group of size " +
                                std::to_string(g.size()) + ".");
  }
  if (g.size() == 1) {
    throw std::invalid_argument(
        std::string("[") + op + "] Cannot " + what + " rank " +
        std::to_string(peer) +
        ": the group is this process alone (size 1; start the processes "
        "with mpirun for a larger group).");
  }
  if (peer == g.rank()) {
    throw std::invalid_argument(std::string("[") + op + "] Cannot " + what +
                                " this process itself (rank " +
                                std::to_string(peer) + ").");
  }
}

array reduce(const array& x, const std::optional<Group>& group,
             StreamOrDevice s, detail::ReduceOp op) {
  Group g = resolve(group);
  if (elided(g)) {
    return x;
  }
  auto p = std::make_shared<AllReduce>(comm_stream(p_name(op), s, g), g, op);
  return array(x.shape(), x.dtype(), p, {x});
}

}  // namespace

const char* AllReduce::op_name() const { return p_name(op_); }

array all_sum(const array& x, std::optional<Group> g, StreamOrDevice s) {
  return reduce(x, g, s, detail::ReduceOp::sum);
}
array all_max(const array& x, std::optional<Group> g, StreamOrDevice s) {
  return reduce(x, g, s, detail::ReduceOp::max);
}
array all_min(const array& x, std::optional<Group> g, StreamOrDevice s) {
  return reduce(x, g, s, detail::ReduceOp::min);
}

array all_gather(const array& x, std::optional<Group> group, StreamOrDevice s) {
  Group g = resolve(group);
  if (elided(g)) {
    return x;
  }
  auto p = std::make_shared<AllGather>(comm_stream("all_gather", s, g), g);
  return array(p->output_shapes({x})[0], x.dtype(), p, {x});
}

array sum_scatter(const array& x, std::optional<Group> group,
                  StreamOrDevice s) {
  if (x.ndim() == 0) {
    throw std::invalid_argument(
        "[sum_scatter] Expected an array with at least one dimension; got a "
        "0-d array.");
  }
  Group g = resolve(group);
  if (elided(g)) {
    return x;
  }
  if (x.shape(0) % g.size() != 0) {
    throw std::invalid_argument("[sum_scatter] The first axis (" +
                                std::to_string(x.shape(0)) +
                                ") must be divisible by the group's size (" +
                                std::to_string(g.size()) + ").");
  }
  auto p = std::make_shared<ReduceScatter>(comm_stream("sum_scatter", s, g), g);
  return array(p->output_shapes({x})[0], x.dtype(), p, {x});
}

array send(const array& x, int dst, std::optional<Group> group,
           StreamOrDevice s) {
  Group g = resolve(group);
  check_peer("send", "send to", dst, g);
  return array(x.shape(), x.dtype(),
               std::make_shared<Send>(comm_stream("send", s, g), g, dst), {x});
}

array recv(Shape shape, Dtype dtype, int src, std::optional<Group> group,
           StreamOrDevice s) {
  Group g = resolve(group);
  check_peer("recv", "receive from", src, g);
  for (auto d : shape) {
    if (d < 0) {
      throw std::invalid_argument(
          "[recv] Negative dimensions are not allowed.");
    }
  }
  return array(std::move(shape), dtype,
               std::make_shared<Recv>(comm_stream("recv", s, g), g, src), {});
}

array recv_like(const array& x, int src, std::optional<Group> group,
                StreamOrDevice s) {
  return recv(x.shape(), x.dtype(), src, group, s);
}

// --- rules ---

bool AllReduce::is_equivalent(const Primitive& o) const {
  auto* p = dynamic_cast<const AllReduce*>(&o);
  return p && p->op_ == op_ && p->group_.comm() == group_.comm();
}
bool AllGather::is_equivalent(const Primitive& o) const {
  auto* p = dynamic_cast<const AllGather*>(&o);
  return p && p->group_.comm() == group_.comm();
}
bool ReduceScatter::is_equivalent(const Primitive& o) const {
  auto* p = dynamic_cast<const ReduceScatter*>(&o);
  return p && p->group_.comm() == group_.comm();
}

std::vector<Shape> AllGather::output_shapes(const std::vector<array>& in) {
  Shape sh = in[0].shape();
  if (sh.empty()) {
    return {Shape{group_.size()}};
  }
  sh[0] *= group_.size();
  return {sh};
}

std::vector<Shape> ReduceScatter::output_shapes(const std::vector<array>& in) {
  Shape sh = in[0].shape();
  sh[0] /= group_.size();
  return {sh};
}

// Where x is the max (min) of all processes, as a 0/1 mask of x's dtype,
// and how many processes hold it: ties share the cotangent evenly, as the
// max reduction's rule does.
static array arg_share(const array& x, const array& out, const Group& g,
                       Stream s) {
  array mask = astype(equal(x, out, s), x.dtype(), s);
  return divide(mask, all_sum(mask, g, s), s);
}

std::vector<array> AllReduce::jvp(const Arrays& primals, const Arrays& tangents,
                                  const std::vector<int>&) {
  auto s = stream();
  if (op_ == detail::ReduceOp::sum) {
    return {all_sum(tangents[0], group_, s)};
  }
  array out = reduce(primals[0], group_, s, op_);
  return {
      all_sum(multiply(tangents[0], arg_share(primals[0], out, group_, s), s),
              group_, s)};
}

std::vector<array> AllReduce::vjp(const Arrays& primals, const Arrays& cts,
                                  const std::vector<int>&,
                                  const Arrays& outputs) {
  auto s = stream();
  array total = all_sum(cts[0], group_, s);
  if (op_ == detail::ReduceOp::sum) {
    return {total};
  }
  return {multiply(total, arg_share(primals[0], outputs[0], group_, s), s)};
}

Batched AllReduce::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  return {{reduce(inputs[0], group_, stream(), op_)}, {axes[0]}};
}

std::vector<array> AllGather::jvp(const Arrays&, const Arrays& tangents,
                                  const std::vector<int>&) {
  return {all_gather(tangents[0], group_, stream())};
}

std::vector<array> AllGather::vjp(const Arrays& primals, const Arrays& cts,
                                  const std::vector<int>&, const Arrays&) {
  const array& x = primals[0];
  int n = x.ndim() == 0 ? 1 : x.shape(0);
  Shape start(cts[0].ndim(), 0), stop = cts[0].shape();
  start[0] = group_.rank() * n;
  stop[0] = start[0] + n;
  array part = slice(cts[0], start, stop, stream());
  return {x.ndim() == 0 ? reshape(part, {}, stream()) : part};
}

// The batch axis goes to position 1, so that axis 0 is still the one
// gathered (scattered); a 0-d element counts as shape (1,).
static array batch_second(const array& x, int axis, Stream s) {
  if (x.ndim() == 1) {
    return expand_dims(x, 0, s);
  }
  return moveaxis(x, axis, 1, s);
}

Batched AllGather::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  return {{all_gather(batch_second(inputs[0], axes[0], stream()), group_,
                      stream())},
          {1}};
}

std::vector<array> ReduceScatter::jvp(const Arrays&, const Arrays& tangents,
                                      const std::vector<int>&) {
  return {sum_scatter(tangents[0], group_, stream())};
}

std::vector<array> ReduceScatter::vjp(const Arrays&, const Arrays& cts,
                                      const std::vector<int>&, const Arrays&) {
  return {all_gather(cts[0], group_, stream())};
}

Batched ReduceScatter::vmap(const Arrays& inputs,
                            const std::vector<int>& axes) {
  if (inputs[0].ndim() == 1) {
    throw std::invalid_argument(
        "[sum_scatter] Expected an array with at least one dimension; got a "
        "0-d array.");
  }
  return {{sum_scatter(moveaxis(inputs[0], axes[0], 1, stream()), group_,
                       stream())},
          {1}};
}

Batched Send::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  return {{send(inputs[0], dst_, group_, stream())}, {axes[0]}};
}

}  // namespace fluxion::distributed
