// Op-spec cases of the multi-axis gather and scatter family: several axes
// with broadcast indices, windows (slice sizes > 1), every scatter kind,
// duplicate and negative indices.
#include "fluxion/ops/gather_scatter.h"
#include "fluxion/ops/indexing.h"
#include "op_cases.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

// Host gather/scatter in MLX's multi-axis semantics: index rows (the
// broadcast index arrays, row-major) select a window origin along `axes`
// (negative indices wrap); the window spans every axis.
struct Rows {
  Shape shape;                        // broadcast index shape
  std::vector<std::vector<int>> pos;  // per row: origin on each indexed axis
};
Rows index_rows(const Arrays& idx, const Shape& a_shape,
                const std::vector<int>& axes) {
  Shape s;
  for (auto& i : idx) s = broadcast_shapes(s, i.shape(), "gather_ref");
  Rows r{s, {}};
  std::vector<std::vector<double>> v;
  for (auto& i : idx) v.push_back(values(broadcast_to(i, s)));
  size_t n = shape_size(s);
  for (size_t k = 0; k < n; ++k) {
    std::vector<int> p;
    for (size_t j = 0; j < idx.size(); ++j) {
      int e = static_cast<int>(v[j][k]);
      int len = a_shape[axes[j]];
      p.push_back(e < 0 ? e + len : e);
    }
    r.pos.push_back(p);
  }
  return r;
}
// Flat offset in `a` of window element `w` (row-major over window shape)
// for a row's origin.
int64_t window_offset(const Shape& a_shape, const std::vector<int>& axes,
                      const std::vector<int>& origin, const Shape& window,
                      int64_t w) {
  std::vector<int> wi(window.size());
  for (int d = static_cast<int>(window.size()) - 1; d >= 0; --d) {
    wi[d] = static_cast<int>(w % window[d]);
    w /= window[d];
  }
  int64_t off = 0;
  for (size_t d = 0; d < a_shape.size(); ++d) {
    int o = wi[d];
    for (size_t j = 0; j < axes.size(); ++j) {
      if (axes[j] == static_cast<int>(d)) o += origin[j];
    }
    off = off * a_shape[d] + o;
  }
  return off;
}
array gather_ref(const array& a, const Arrays& idx, const std::vector<int>& axes,
                 const Shape& window) {
  auto av = values(a);
  auto rows = index_rows(idx, a.shape(), axes);
  std::vector<double> out;
  for (auto& origin : rows.pos)
    for (int64_t w = 0; w < int64_t(shape_size(window)); ++w)
      out.push_back(av[window_offset(a.shape(), axes, origin, window, w)]);
  Shape s = rows.shape;
  s.insert(s.end(), window.begin(), window.end());
  return host_array(out, s);
}
array scatter_ref(const array& a, const Arrays& idx, const array& upd,
                  const std::vector<int>& axes,
                  const std::function<double(double, double)>& op) {
  // Updates take a's dtype (as the op casts them).
  auto av = values(a), uv = values(astype(upd, a.dtype()));
  auto rows = index_rows(idx, a.shape(), axes);
  Shape window(upd.shape().end() - a.ndim(), upd.shape().end());
  int64_t wn = shape_size(window);
  for (size_t r = 0; r < rows.pos.size(); ++r)
    for (int64_t w = 0; w < wn; ++w) {
      auto off = window_offset(a.shape(), axes, rows.pos[r], window, w);
      av[off] = op(av[off], uv[r * wn + w]);
    }
  return host_array(av, a.shape());
}


using ScatterFn = array (*)(const array&, const std::vector<array>&,
                            const array&, const std::vector<int>&,
                            StreamOrDevice);

std::vector<OpCase> gather_scatter_cases() {
  std::vector<OpCase> c;
  auto entry = [&](const std::string& name, Fn f, std::vector<In> in, Ref ref,
                   Deriv deriv = Deriv::second) {
    OpCase k{name, std::move(f), std::move(in),
             deriv};
    k.dtypes = {float64, float32, int32};
    k.ref = std::move(ref);
    k.fwd_tol = 1e-12;
    c.push_back(std::move(k));
  };
  entry("gather_multi_axis",
        [](const Arrays& x) {
          return Arrays{gather(x[0], {x[1], x[2]}, {0, 2}, {1, 2, 1})};
        },
        {normal({4, 5, 3}), array({0, -1, 2}, {3, 1}), array({2, 0}, {1, 2})},
        [](const Arrays& x) {
          return Arrays{gather_ref(x[0], {x[1], x[2]}, {0, 2}, {1, 2, 1})};
        });
  entry("gather_window_duplicates",
        [](const Arrays& x) { return Arrays{gather(x[0], x[1], 0, {3, 2})}; },
        {normal({6, 3}), array({-3, 1, 1, 0})}, [](const Arrays& x) {
          return Arrays{gather_ref(x[0], {x[1]}, {0}, {3, 2})};
        });
  using Op = std::function<double(double, double)>;
  auto add_scatter = [&](const std::string& name, ScatterFn f, In a,
                         std::vector<array> idx, std::vector<int> axes, In u,
                         Op op, Deriv deriv = Deriv::second) {
    size_t k = idx.size();
    std::vector<In> inputs{std::move(a)};
    inputs.insert(inputs.end(), idx.begin(), idx.end());
    inputs.push_back(std::move(u));
    entry(name,
          [f, k, axes](const Arrays& x) {
            std::vector<array> ix(x.begin() + 1, x.begin() + 1 + k);
            return Arrays{f(x[0], ix, x[k + 1], axes, {})};
          },
          std::move(inputs),
          [k, axes, op](const Arrays& x) {
            Arrays ix(x.begin() + 1, x.begin() + 1 + k);
            return Arrays{scatter_ref(x[0], ix, x[k + 1], axes, op)};
          },
          deriv);
  };
  Op set = [](double, double u) { return u; };
  Op plus = [](double a, double u) { return a + u; };
  Op times = [](double a, double u) { return a * u; };
  Op mx = [](double a, double u) { return std::max(a, u); };
  Op mn = [](double a, double u) { return std::min(a, u); };
  // Duplicates along one axis, with a negative index.
  array dup = array({1, 3, 1, -1});
  add_scatter("scatter_duplicates", &scatter, normal({5, 3}), {dup}, {0},
              normal({4, 1, 3}), set);
  add_scatter("scatter_add_multi_axis", &scatter_add, normal({4, 3, 2}),
              {array({0, 2, 0, -4}, {4, 1}), array({1, -2}, {1, 2})}, {0, 1},
              normal({4, 2, 1, 1, 2}), plus);
  add_scatter("scatter_add_window", &scatter_add, normal({6, 2}),
              {array({0, 2, 1})}, {0}, normal({3, 3, 2}), plus);
  add_scatter("scatter_window_overlap", &scatter, normal({6, 2}),
              {array({2, 0, 1})}, {0}, normal({3, 3, 1}), set);
  add_scatter("scatter_prod_duplicates", &scatter_prod, normal({5, 3}), {dup},
              {0}, normal({4, 1, 3}), times);
  // A zero update: its derivative is the product of the others. (Second
  // order is left out: with two zeros at one element the rule's
  // derivative of "the others' product" is not tracked through where.)
  add_scatter("scatter_prod_zero_update", &scatter_prod, normal({3, 2}),
              {array({0, 0, 2})}, {0},
              array({0.0, 1.5, -0.7, 2.0, 0.3, 0.0}, {3, 1, 2}), times,
              Deriv::first);
  add_scatter("scatter_max_duplicates", &scatter_max, normal({5, 3}), {dup},
              {0}, normal({4, 1, 3}), mx);
  add_scatter("scatter_min_duplicates", &scatter_min, normal({5, 3}), {dup},
              {0}, normal({4, 1, 3}), mn);
  entry("take_mode_wrap_clip",
        [](const Arrays& x) {
          return Arrays{take(x[0], x[1], 1, "wrap"), take(x[0], x[1], 0, "clip")};
        },
        {normal({3, 4}), array({5, -1, 9, 2})}, [](const Arrays& x) {
          Host a(x[0]);
          auto idx = values(x[1]);
          std::vector<double> wrap, clip;
          for (int i = 0; i < 3; ++i)
            for (double e : idx) {
              int j = ((int(e) % 4) + 4) % 4;
              wrap.push_back(a.v[i * 4 + j]);
            }
          for (double e : idx) {
            int i = std::min(std::max(int(e), 0), 2);
            for (int j = 0; j < 4; ++j) clip.push_back(a.v[i * 4 + j]);
          }
          return Arrays{host_array(wrap, {3, 4}), host_array(clip, {4, 4})};
        });
  return c;
}

}  // namespace

FLUXION_REGISTER_OP_CASES(gather_scatter_cases);
