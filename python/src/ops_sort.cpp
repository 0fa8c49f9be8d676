// Sorting, partitioning, top-k and cumulative scans (mx.sort, mx.cumsum,
// ...); the scans are array methods too.
#include "python/src/ops_common.h"

namespace {

using SortAxisFn = fx::array (*)(const fx::array&, int, fx::StreamOrDevice);
using SortAllFn = fx::array (*)(const fx::array&, fx::StreamOrDevice);
using KthAxisFn = fx::array (*)(const fx::array&, int, int, fx::StreamOrDevice);
using KthAllFn = fx::array (*)(const fx::array&, int, fx::StreamOrDevice);
using ScanAxisFn = fx::array (*)(const fx::array&, int, bool, bool,
                                 fx::StreamOrDevice);
using ScanAllFn = fx::array (*)(const fx::array&, bool, bool,
                                fx::StreamOrDevice);

// axis=None works on the flattened array.
template <SortAxisFn Axis, SortAllFn All>
fx::array sort_like(const fx::array& a, std::optional<int> axis,
                    fx::StreamOrDevice s) {
  return axis ? Axis(a, *axis, s) : All(a, s);
}

template <KthAxisFn Axis, KthAllFn All>
fx::array kth_like(const fx::array& a, int kth, std::optional<int> axis,
                   fx::StreamOrDevice s) {
  return axis ? Axis(a, kth, *axis, s) : All(a, kth, s);
}

template <ScanAxisFn Axis, ScanAllFn All>
fx::array scan(const fx::array& a, std::optional<int> axis, bool reverse,
               bool inclusive, fx::StreamOrDevice s) {
  return axis ? Axis(a, *axis, reverse, inclusive, s)
              : All(a, reverse, inclusive, s);
}

}  // namespace

void init_ops_sort(py::module_& m) {
  const auto s = "stream"_a = py::none();
#define FLUXION_SORT(NAME)                                            \
  m.def(#NAME, &sort_like<fx::NAME, fx::NAME>, "a"_a, py::pos_only(), \
        "axis"_a = -1, py::kw_only(), s);
  FLUXION_SORT(sort)
  FLUXION_SORT(argsort)
#undef FLUXION_SORT
#define FLUXION_KTH(NAME, KTH)                                            \
  m.def(#NAME, &kth_like<fx::NAME, fx::NAME>, "a"_a, py::pos_only(), KTH, \
        "axis"_a = -1, py::kw_only(), s);
  FLUXION_KTH(partition, "kth"_a)
  FLUXION_KTH(argpartition, "kth"_a)
  FLUXION_KTH(topk, "k"_a)
#undef FLUXION_KTH

  auto cls = py::reinterpret_borrow<py::class_<fx::array>>(m.attr("array"));
#define FLUXION_SCAN(NAME)                                         \
  m.def(#NAME, &scan<fx::NAME, fx::NAME>, "a"_a, py::pos_only(),   \
        "axis"_a = py::none(), py::kw_only(), "reverse"_a = false, \
        "inclusive"_a = true, s);                                  \
  cls.def(#NAME, &scan<fx::NAME, fx::NAME>, "axis"_a = py::none(), \
          py::kw_only(), "reverse"_a = false, "inclusive"_a = true, s);
  FLUXION_SCAN(cumsum)
  FLUXION_SCAN(cumprod)
  FLUXION_SCAN(cummax)
  FLUXION_SCAN(cummin)
  FLUXION_SCAN(logcumsumexp)
#undef FLUXION_SCAN
}
