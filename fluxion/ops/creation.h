// Arrays made from nothing but a shape and values.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

// `vals` broadcast to `shape` (a lazy broadcast of a scalar).
array full(Shape shape, const array& vals, Dtype dtype, StreamOrDevice s = {});
array full(Shape shape, const array& vals, StreamOrDevice s = {});
template <typename T>
array full(Shape shape, T val, Dtype dtype, StreamOrDevice s = {}) {
  return full(std::move(shape), array(val, dtype), s);
}
template <typename T>
array full(Shape shape, T val, StreamOrDevice s = {}) {
  return full(std::move(shape), array(val), s);
}
array zeros(const Shape& shape, Dtype dtype = float32, StreamOrDevice s = {});
array ones(const Shape& shape, Dtype dtype = float32, StreamOrDevice s = {});
array zeros_like(const array& a, StreamOrDevice s = {});
array ones_like(const array& a, StreamOrDevice s = {});
array full_like(const array& a, const array& vals, StreamOrDevice s = {});

// [start, stop) in steps of `step`; the dtype defaults to int32 when all
// arguments are integers, else float32.
array arange(double start, double stop, double step, Dtype dtype,
             StreamOrDevice s = {});
array arange(double start, double stop, double step, StreamOrDevice s = {});
array arange(double start, double stop, Dtype dtype, StreamOrDevice s = {});
array arange(double start, double stop, StreamOrDevice s = {});
array arange(double stop, Dtype dtype, StreamOrDevice s = {});
array arange(double stop, StreamOrDevice s = {});
array arange(int start, int stop, int step, StreamOrDevice s = {});
array arange(int start, int stop, StreamOrDevice s = {});
array arange(int stop, StreamOrDevice s = {});

array linspace(double start, double stop, int num = 50, Dtype dtype = float32,
               StreamOrDevice s = {});
// endpoint = false leaves `stop` out: num values with step (stop - start) /
// num (NumPy).
array linspace(double start, double stop, int num, bool endpoint,
               Dtype dtype = float32, StreamOrDevice s = {});

// n x m with ones on diagonal k.
array eye(int n, int m, int k, Dtype dtype = float32, StreamOrDevice s = {});
array eye(int n, Dtype dtype = float32, StreamOrDevice s = {});
array identity(int n, Dtype dtype = float32, StreamOrDevice s = {});
// Ones at and below diagonal k.
array tri(int n, int m, int k, Dtype dtype = float32, StreamOrDevice s = {});
array tri(int n, Dtype dtype = float32, StreamOrDevice s = {});
array tril(const array& x, int k = 0, StreamOrDevice s = {});
array triu(const array& x, int k = 0, StreamOrDevice s = {});

class Arange : public Primitive {
 public:
  Arange(Stream s, double start, double stop, double step, Dtype dtype)
      : Primitive(s), start_(start), stop_(stop), step_(step), dtype_(dtype) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Arange"; }
  FLUXION_DECLARE_STATE
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  FLUXION_DECLARE_RULES
  double start() const { return start_; }
  double stop() const { return stop_; }
  double step() const { return step_; }
  // The output dtype: the jvp and vmap rules, which get no outputs, rebuild
  // arrays of it.
  Dtype dtype() const { return dtype_; }

 private:
  double start_, stop_, step_;
  Dtype dtype_;
};

}  // namespace fluxion
