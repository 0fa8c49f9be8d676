// Op-spec cases of the convolutions: every option (stride, padding,
// dilations, groups, flip), 1-D to 3-D, and the transposed forms. Small
// float64 shapes keep the finite-difference checks fast.
#include "op_cases.h"

namespace fluxion::test {

std::vector<OpCase> conv_cases() {
  std::vector<OpCase> c;
  auto add = [&](const std::string& name,
                 std::function<array(const array&, const array&)> g,
                 const Shape& xs, const Shape& ws, unsigned seed,
                 bool second = false) {
    c.push_back({name,
                 binary(g),
                 {rnd(xs, seed), rnd(ws, seed + 1)},
                 true,
                 second,
                 1e-6});
  };
  add(
      "conv1d", [](auto& x, auto& w) { return conv1d(x, w); }, {2, 6, 3},
      {2, 3, 3}, 1, true);
  add(
      "conv1d_stride_pad_dilation",
      [](auto& x, auto& w) { return conv1d(x, w, 2, 2, 2); }, {1, 7, 2},
      {3, 2, 2}, 3);
  add(
      "conv1d_groups",
      [](auto& x, auto& w) { return conv1d(x, w, 1, 1, 1, 2); }, {2, 5, 4},
      {4, 2, 2}, 5);
  add(
      "conv2d", [](auto& x, auto& w) { return conv2d(x, w, 1, 1); },
      {1, 4, 5, 2}, {3, 3, 2, 2}, 7, true);
  add(
      "conv2d_stride_uneven",
      [](auto& x, auto& w) {
        return conv2d(x, w, {2, 3}, {1, 0});
      },
      {2, 6, 7, 2}, {2, 2, 3, 2}, 9);
  add(
      "conv2d_dilation_groups",
      [](auto& x, auto& w) {
        return conv2d(x, w, {1, 1}, {1, 2}, {2, 1}, 3);
      },
      {1, 6, 5, 3}, {3, 2, 2, 1}, 11);
  add(
      "conv3d", [](auto& x, auto& w) { return conv3d(x, w, 1, 1); },
      {1, 3, 4, 3, 2}, {2, 2, 3, 2, 2}, 13);
  add(
      "conv3d_stride", [](auto& x, auto& w) { return conv3d(x, w, 2); },
      {1, 5, 4, 5, 1}, {2, 2, 2, 3, 1}, 15);
  add(
      "conv_general_flip_input_dilation",
      [](auto& x, auto& w) {
        return conv_general(x, w, {1, 2}, {1, 2}, {2, 0}, {1, 2}, {2, 1}, 1,
                            true);
      },
      {1, 4, 5, 2}, {2, 2, 2, 2}, 17, true);
  add(
      "conv_general_1d_everything",
      [](auto& x, auto& w) {
        return conv_general(x, w, {3}, {2}, {1}, {2}, {3}, 2, true);
      },
      {2, 4, 2}, {2, 2, 1}, 19);
  add(
      "conv_transpose1d",
      [](auto& x, auto& w) { return conv_transpose1d(x, w, 2, 1, 1, 1); },
      {1, 4, 2}, {3, 3, 2}, 21, true);
  add(
      "conv_transpose2d_groups",
      [](auto& x, auto& w) {
        return conv_transpose2d(x, w, {2, 1}, {0, 1}, {1, 2}, {1, 0}, 2);
      },
      {1, 3, 4, 2}, {4, 2, 3, 1}, 23);
  add(
      "conv_transpose3d",
      [](auto& x, auto& w) { return conv_transpose3d(x, w, 2, 1); },
      {1, 2, 3, 2, 1}, {2, 2, 2, 3, 1}, 25);
  add(
      "convolve_same", [](auto& a, auto& v) { return convolve(a, v, "same"); },
      {7}, {4}, 27);
  add(
      "convolve_full", [](auto& a, auto& v) { return convolve(a, v); }, {3},
      {5}, 29);
  add(
      "conv2d_depthwise",
      [](auto& x, auto& w) { return conv2d(x, w, 2, 1, 1, 3); }, {1, 5, 4, 3},
      {3, 3, 2, 1}, 31, true);
  return c;
}

FLUXION_REGISTER_OP_CASES(conv_cases);

}  // namespace fluxion::test
