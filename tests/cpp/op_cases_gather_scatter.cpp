// Op-spec cases of the multi-axis gather and scatter family: several axes
// with broadcast indices, windows (slice sizes > 1), every scatter kind,
// duplicate and negative indices.
#include "fluxion/ops/gather_scatter.h"
#include "fluxion/ops/indexing.h"
#include "op_cases.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

using ScatterFn = array (*)(const array&, const std::vector<array>&,
                            const array&, const std::vector<int>&,
                            StreamOrDevice);

std::vector<OpCase> gather_scatter_cases() {
  std::vector<OpCase> c;
  c.push_back(
      {"gather_multi_axis",
       [](const std::vector<array>& x) {
         return std::vector<array>{
             gather(x[0], {x[1], x[2]}, {0, 2}, {1, 2, 1})};
       },
       {rnd({4, 5, 3}, 201), array({0, -1, 2}, {3, 1}), array({2, 0}, {1, 2})},
       true,
       true});
  c.push_back({"gather_window_duplicates",
               [](const std::vector<array>& x) {
                 return std::vector<array>{gather(x[0], x[1], 0, {3, 2})};
               },
               {rnd({6, 3}, 202), array({-3, 1, 1, 0})},
               true,
               true});
  auto add_scatter = [&](const std::string& name, ScatterFn f, array a,
                         std::vector<array> idx, std::vector<int> axes, array u,
                         bool second = true) {
    size_t k = idx.size();
    std::vector<array> inputs{std::move(a)};
    inputs.insert(inputs.end(), idx.begin(), idx.end());
    inputs.push_back(std::move(u));
    c.push_back({name,
                 [f, k, axes](const std::vector<array>& x) {
                   std::vector<array> ix(x.begin() + 1, x.begin() + 1 + k);
                   return std::vector<array>{f(x[0], ix, x[k + 1], axes, {})};
                 },
                 std::move(inputs), true, second});
  };
  // Duplicates along one axis, with a negative index.
  array dup = array({1, 3, 1, -1});
  add_scatter("scatter_duplicates", &scatter, rnd({5, 3}, 203), {dup}, {0},
              rnd({4, 1, 3}, 204));
  add_scatter("scatter_add_multi_axis", &scatter_add, rnd({4, 3, 2}, 205),
              {array({0, 2, 0, -4}, {4, 1}), array({1, -2}, {1, 2})}, {0, 1},
              rnd({4, 2, 1, 1, 2}, 206));
  add_scatter("scatter_add_window", &scatter_add, rnd({6, 2}, 207),
              {array({0, 2, 1})}, {0}, rnd({3, 3, 2}, 208));
  add_scatter("scatter_window_overlap", &scatter, rnd({6, 2}, 215),
              {array({2, 0, 1})}, {0}, rnd({3, 3, 1}, 216));
  add_scatter("scatter_prod_duplicates", &scatter_prod, rnd({5, 3}, 209), {dup},
              {0}, rnd({4, 1, 3}, 210));
  // A zero update: its derivative is the product of the others. (Second
  // order is left out: with two zeros at one element the rule's
  // derivative of "the others' product" is not tracked through where.)
  add_scatter("scatter_prod_zero_update", &scatter_prod, rnd({3, 2}, 211),
              {array({0, 0, 2})}, {0},
              array({0.0, 1.5, -0.7, 2.0, 0.3, 0.0}, {3, 1, 2}), false);
  add_scatter("scatter_max_duplicates", &scatter_max, rnd({5, 3}, 212), {dup},
              {0}, rnd({4, 1, 3}, 213));
  add_scatter("scatter_min_duplicates", &scatter_min, rnd({5, 3}, 214), {dup},
              {0}, rnd({4, 1, 3}, 217));
  c.push_back({"take_mode_wrap_clip",
               [](const std::vector<array>& x) {
                 return std::vector<array>{take(x[0], x[1], 1, "wrap"),
                                           take(x[0], x[1], 0, "clip")};
               },
               {rnd({3, 4}, 218), array({5, -1, 9, 2})}});
  return c;
}

}  // namespace

FLUXION_REGISTER_OP_CASES(gather_scatter_cases);
