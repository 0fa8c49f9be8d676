// Convolutions: mx.conv1d, conv2d, conv3d, conv_general, conv_transpose1d,
// conv_transpose2d, conv_transpose3d and convolve (MLX's names, arguments
// and defaults). Per-axis arguments take an int (every axis) or a tuple.
#include <string>
#include <tuple>

#include "python/src/docs.h"
#include "python/src/convert.h"

namespace {

using Int2 = std::variant<int, std::pair<int, int>>;
using Int3 = std::variant<int, std::tuple<int, int, int>>;
using IntOrVec = std::variant<int, std::vector<int>>;
// conv_general's padding: int, one value per axis, or (low, high) lists.
using Padding = std::variant<int, std::vector<int>,
                             std::pair<std::vector<int>, std::vector<int>>>;

std::pair<int, int> pair_of(const Int2& v) {
  if (auto* i = std::get_if<int>(&v)) {
    return {*i, *i};
  }
  return std::get<std::pair<int, int>>(v);
}

std::tuple<int, int, int> triple_of(const Int3& v) {
  if (auto* i = std::get_if<int>(&v)) {
    return {*i, *i, *i};
  }
  return std::get<std::tuple<int, int, int>>(v);
}

std::vector<int> vec_of(const IntOrVec& v) {
  if (auto* i = std::get_if<int>(&v)) {
    return {*i};
  }
  return std::get<std::vector<int>>(v);
}

}  // namespace

void init_ops_conv(py::module_& m) {
  const auto s = "stream"_a = py::none();
  m.def(
      "conv1d",
      [](const fx::array& input, const fx::array& weight, int stride,
         int padding, int dilation, int groups, fx::StreamOrDevice st) {
        return fx::conv1d(input, weight, stride, padding, dilation, groups, st);
      },
      "input"_a, "weight"_a, py::pos_only(), "stride"_a = 1, "padding"_a = 0,
      "dilation"_a = 1, "groups"_a = 1, py::kw_only(), s,
      R"doc(1-D convolution.

Args:
    input (array): Input, channels-last: ``[N, L, C_in]``.
    weight (array): Kernels: ``[C_out, K, C_in / groups]``.
    stride (int, optional): Kernel strides. Default 1.
    padding (int, optional): Zero padding on both sides.
        Default 0.
    dilation (int, optional): Kernel dilation. Default 1.
    groups (int, optional): Input channel groups. Default 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``[N, L_out, C_out]``.
)doc");
  m.def(
      "conv2d",
      [](const fx::array& input, const fx::array& weight, const Int2& stride,
         const Int2& padding, const Int2& dilation, int groups,
         fx::StreamOrDevice st) {
        return fx::conv2d(input, weight, pair_of(stride), pair_of(padding),
                          pair_of(dilation), groups, st);
      },
      "input"_a, "weight"_a, py::pos_only(), "stride"_a = 1, "padding"_a = 0,
      "dilation"_a = 1, "groups"_a = 1, py::kw_only(), s,
      R"doc(2-D convolution.

Args:
    input (array): Input, channels-last: ``[N, H, W, C_in]``.
    weight (array): Kernels: ``[C_out, KH, KW, C_in / groups]``.
    stride (int or tuple(int), optional): Kernel strides. Default 1.
    padding (int or tuple(int), optional): Zero padding on both sides.
        Default 0.
    dilation (int or tuple(int), optional): Kernel dilation. Default 1.
    groups (int, optional): Input channel groups. Default 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``[N, H_out, W_out, C_out]``.
)doc");
  m.def(
      "conv3d",
      [](const fx::array& input, const fx::array& weight, const Int3& stride,
         const Int3& padding, const Int3& dilation, int groups,
         fx::StreamOrDevice st) {
        return fx::conv3d(input, weight, triple_of(stride), triple_of(padding),
                          triple_of(dilation), groups, st);
      },
      "input"_a, "weight"_a, py::pos_only(), "stride"_a = 1, "padding"_a = 0,
      "dilation"_a = 1, "groups"_a = 1, py::kw_only(), s,
      R"doc(3-D convolution.

Args:
    input (array): Input, channels-last: ``[N, D, H, W, C_in]``.
    weight (array): Kernels: ``[C_out, KD, KH, KW, C_in / groups]``.
    stride (int or tuple(int), optional): Kernel strides. Default 1.
    padding (int or tuple(int), optional): Zero padding on both sides.
        Default 0.
    dilation (int or tuple(int), optional): Kernel dilation. Default 1.
    groups (int, optional): Input channel groups. Default 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``[N, D_out, H_out, W_out, C_out]``.
)doc");
  m.def(
      "conv_general",
      [](const fx::array& input, const fx::array& weight,
         const IntOrVec& stride, const Padding& padding,
         const IntOrVec& kernel_dilation, const IntOrVec& input_dilation,
         int groups, bool flip, fx::StreamOrDevice st) {
        std::vector<int> lo, hi;
        if (auto* i = std::get_if<int>(&padding)) {
          lo = hi = {*i};
        } else if (auto* v = std::get_if<std::vector<int>>(&padding)) {
          lo = hi = *v;
        } else {
          auto& p = std::get<2>(padding);
          lo = p.first;
          hi = p.second;
        }
        return fx::conv_general(input, weight, vec_of(stride), lo, hi,
                                vec_of(kernel_dilation), vec_of(input_dilation),
                                groups, flip, st);
      },
      "input"_a, "weight"_a, py::pos_only(), "stride"_a = 1, "padding"_a = 0,
      "kernel_dilation"_a = 1, "input_dilation"_a = 1, "groups"_a = 1,
      "flip"_a = false, py::kw_only(), s,
      R"doc(General convolution over 1 to 3 spatial axes.

With input dilation, asymmetric padding and an optional kernel flip (a
cross-correlation unless ``flip``).

Args:
    input (array): Input, channels-last: ``[N, ..., C_in]``.
    weight (array): Kernels: ``[C_out, ..., C_in / groups]``.
    stride (int or list(int), optional): Strides. Default 1.
    padding (int, list(int) or tuple(list(int), list(int)), optional):
        Padding: one value, one per axis, or ``(low, high)`` lists.
        Default 0.
    kernel_dilation (int or list(int), optional): Kernel dilation.
        Default 1.
    input_dilation (int or list(int), optional): Input dilation.
        Default 1.
    groups (int, optional): Input channel groups. Default 1.
    flip (bool, optional): Flip the kernel (a true convolution).
        Default ``False``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``[N, ..., C_out]``.
)doc");
  m.def(
      "conv_transpose1d",
      [](const fx::array& input, const fx::array& weight, int stride,
         int padding, int dilation, int output_padding, int groups,
         fx::StreamOrDevice st) {
        return fx::conv_transpose1d(input, weight, stride, padding, dilation,
                                    output_padding, groups, st);
      },
      "input"_a, "weight"_a, py::pos_only(), "stride"_a = 1, "padding"_a = 0,
      "dilation"_a = 1, "output_padding"_a = 0, "groups"_a = 1, py::kw_only(),
      s,
      R"doc(1-D transposed convolution (the gradient of a convolution with respect to its input).

Args:
    input (array): Input, channels-last: ``[N, L, C_in]``.
    weight (array): Kernels: ``[C_out, K, C_in / groups]``.
    stride (int, optional): Kernel strides. Default 1.
    padding (int, optional): Zero padding on both sides.
        Default 0.
    dilation (int, optional): Kernel dilation. Default 1.
    output_padding (int, optional): Added to one side of
        the output. Default 0.
    groups (int, optional): Input channel groups. Default 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``[N, L_out, C_out]``.
)doc");
  m.def(
      "conv_transpose2d",
      [](const fx::array& input, const fx::array& weight, const Int2& stride,
         const Int2& padding, const Int2& dilation, const Int2& output_padding,
         int groups, fx::StreamOrDevice st) {
        return fx::conv_transpose2d(input, weight, pair_of(stride),
                                    pair_of(padding), pair_of(dilation),
                                    pair_of(output_padding), groups, st);
      },
      "input"_a, "weight"_a, py::pos_only(), "stride"_a = 1, "padding"_a = 0,
      "dilation"_a = 1, "output_padding"_a = 0, "groups"_a = 1, py::kw_only(),
      s,
      R"doc(2-D transposed convolution (the gradient of a convolution with respect to its input).

Args:
    input (array): Input, channels-last: ``[N, H, W, C_in]``.
    weight (array): Kernels: ``[C_out, KH, KW, C_in / groups]``.
    stride (int or tuple(int), optional): Kernel strides. Default 1.
    padding (int or tuple(int), optional): Zero padding on both sides.
        Default 0.
    dilation (int or tuple(int), optional): Kernel dilation. Default 1.
    output_padding (int or tuple(int), optional): Added to one side of
        the output. Default 0.
    groups (int, optional): Input channel groups. Default 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``[N, H_out, W_out, C_out]``.
)doc");
  m.def(
      "conv_transpose3d",
      [](const fx::array& input, const fx::array& weight, const Int3& stride,
         const Int3& padding, const Int3& dilation, const Int3& output_padding,
         int groups, fx::StreamOrDevice st) {
        return fx::conv_transpose3d(input, weight, triple_of(stride),
                                    triple_of(padding), triple_of(dilation),
                                    triple_of(output_padding), groups, st);
      },
      "input"_a, "weight"_a, py::pos_only(), "stride"_a = 1, "padding"_a = 0,
      "dilation"_a = 1, "output_padding"_a = 0, "groups"_a = 1, py::kw_only(),
      s,
      R"doc(3-D transposed convolution (the gradient of a convolution with respect to its input).

Args:
    input (array): Input, channels-last: ``[N, D, H, W, C_in]``.
    weight (array): Kernels: ``[C_out, KD, KH, KW, C_in / groups]``.
    stride (int or tuple(int), optional): Kernel strides. Default 1.
    padding (int or tuple(int), optional): Zero padding on both sides.
        Default 0.
    dilation (int or tuple(int), optional): Kernel dilation. Default 1.
    output_padding (int or tuple(int), optional): Added to one side of
        the output. Default 0.
    groups (int, optional): Input channel groups. Default 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``[N, D_out, H_out, W_out, C_out]``.
)doc");
  m.def(
      "convolve",
      [](const fx::array& a, const fx::array& v, const std::string& mode,
         fx::StreamOrDevice st) { return fx::convolve(a, v, mode, st); },
      "a"_a, "v"_a, py::pos_only(), "mode"_a = "full", py::kw_only(), s,
      R"doc(The discrete linear convolution of two 1-D arrays (NumPy's ``convolve``).

Args:
    a (array): First 1-D array.
    v (array): Second 1-D array.
    mode (str, optional): ``"full"``, ``"same"`` or ``"valid"``.
        Default ``"full"``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The convolution.
)doc");
}
