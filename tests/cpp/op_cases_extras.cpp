// Op-spec cases of the ops added by the MLX audit: searchsorted,
// hadamard_transform, as_strided, view, contiguous, and the composed
// gather_mm / segmented_mm / block_masked_mm.
#include "fluxion/ops/extras.h"
#include "op_cases.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

std::vector<OpCase> extras_cases() {
  std::vector<OpCase> c;
  // The sorted array is a constant: vmap over it raises (as MLX).
  c.push_back({"searchsorted_1d_left",
               [](const std::vector<array>& x) {
                 static const array a = sort(rnd({6}, 303));
                 return std::vector<array>{searchsorted(a, x[0])};
               },
               {rnd({2, 3}, 304)},
               false});
  c.push_back({"searchsorted_1d_right",
               [](const std::vector<array>& x) {
                 static const array a = sort(rnd({5}, 301));
                 return std::vector<array>{searchsorted(a, x[0], "right")};
               },
               {rnd({3, 4}, 302)},
               false});
  c.push_back({"hadamard_transform",
               unary([](const array& x) { return hadamard_transform(x); }),
               {rnd({3, 8}, 305)},
               true,
               true});
  c.push_back(
      {"hadamard_transform_scaled",
       unary([](const array& x) { return hadamard_transform(x, 0.5f); }),
       {rnd({2, 3, 4}, 306)},
       true,
       true});
  c.push_back({"as_strided_overlapping_windows",
               unary([](const array& x) {
                 return as_strided(x, Shape{4, 3}, Strides{2, 1}, 1);
               }),
               {rnd({12}, 307)},
               true,
               true});
  c.push_back({"view_float64_as_int32",
               unary([](const array& x) { return view(x, int32); }),
               {rnd({3, 4}, 308)},
               false});
  c.push_back({"contiguous_of_transpose",
               unary([](const array& x) { return contiguous(transpose(x)); }),
               {rnd({3, 4}, 309)},
               true,
               true});
  c.push_back({"gather_mm",
               [](const std::vector<array>& x) {
                 return std::vector<array>{gather_mm(x[0], x[1], x[2], x[3])};
               },
               {rnd({3, 2, 4}, 310), rnd({2, 4, 5}, 311), array({0, 2, 2}),
                array({1, 0, 1})},
               true,
               true});
  c.push_back(
      {"segmented_mm",
       [](const std::vector<array>& x) {
         return std::vector<array>{segmented_mm(x[0], x[1], x[2])};
       },
       {rnd({2, 6}, 312), rnd({6, 3}, 313), array({0, 2, 1, 6, 3, 3}, {3, 2})},
       true,
       true});
  c.push_back({"block_masked_mm",
               [](const std::vector<array>& x) {
                 return std::vector<array>{
                     block_masked_mm(x[0], x[1], 32, x[2], x[3], std::nullopt)};
               },
               {rnd({40, 36}, 314), rnd({36, 33}, 315),
                array({true, false, true, true}, {2, 2}), rnd({2, 2}, 316)},
               true,
               true});
  return c;
}

}  // namespace

FLUXION_REGISTER_OP_CASES(extras_cases);
