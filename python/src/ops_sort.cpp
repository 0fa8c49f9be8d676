// Sorting, partitioning, top-k and cumulative scans (mx.sort, mx.cumsum,
// ...; the scans are array methods too, and the array API's
// cumulative_sum / cumulative_prod). Also searchsorted
// (fluxion/ops/searchsorted.h).
#include "fluxion/ops/searchsorted.h"
#include "python/src/docs.h"
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

// The array API's cumulative_sum / cumulative_prod: an inclusive scan along
// `axis` (the flattened array when None), optionally starting with the
// identity (include_initial), in `dtype` when given.
template <bool IsSum>
fx::array cumulative(const fx::array& a, std::optional<int> axis,
                     std::optional<fx::Dtype> dtype, bool include_initial,
                     fx::StreamOrDevice s) {
  fx::array x = dtype ? fx::astype(a, *dtype, s) : a;
  if (!axis) {
    x = fx::flatten(x, 0, -1, s);
  }
  int ax = axis.value_or(0);
  fx::array out = IsSum ? fx::cumsum(x, ax, false, true, s)
                        : fx::cumprod(x, ax, false, true, s);
  if (!include_initial) {
    return out;
  }
  int nd = out.ndim();
  int k = fx::normalize_axis(ax, nd, IsSum ? "cumulative_sum"
                                            : "cumulative_prod");
  fx::Shape first = out.shape();
  first[k] = 1;
  fx::array init = IsSum ? fx::zeros(first, out.dtype(), s)
                         : fx::ones(first, out.dtype(), s);
  return fx::concatenate({init, out}, k, s);
}

}  // namespace

void init_ops_sort(py::module_& m) {
  const auto s = "stream"_a = py::none();
#define FLUXION_SORT(NAME, SUMMARY, RESULT)                           \
  m.def(#NAME, &sort_like<fx::NAME, fx::NAME>, "a"_a, py::pos_only(), \
        "axis"_a = -1, py::kw_only(), s,                              \
        SUMMARY FXDOC_ARGS FXDOC_A                                    \
        "    axis (int or None, optional): Axis to sort along; the\n" \
        "        flattened array when ``None``. Default -1.\n"        \
            FXDOC_STREAM FXDOC_RET_ARRAY RESULT "\n");
  FLUXION_SORT(sort, "Sort the elements along an axis, ascending.",
               "The sorted values (NaN last).")
  FLUXION_SORT(argsort, "Indices that sort ``a`` along an axis, ascending.",
               "``uint32`` indices; ``take_along_axis(a, idx, axis)`` is "
               "sorted.")
#undef FLUXION_SORT
#define FLUXION_KTH(NAME, KTH, SUMMARY, KDOC, RESULT)                      \
  m.def(#NAME, &kth_like<fx::NAME, fx::NAME>, "a"_a, py::pos_only(), KTH, \
        "axis"_a = -1, py::kw_only(), s,                                  \
        SUMMARY FXDOC_ARGS FXDOC_A KDOC                                   \
        "    axis (int or None, optional): The axis; the flattened array\n" \
        "        when ``None``. Default -1.\n" FXDOC_STREAM               \
            FXDOC_RET_ARRAY RESULT "\n");
  FLUXION_KTH(partition, "kth"_a,
              "Partially sort so that the element at ``kth`` is in place.",
              "    kth (int): Index of the element to put in its sorted "
              "place.\n",
              "Elements before ``kth`` are not larger and those after are "
              "not smaller; order within each side is unspecified.")
  FLUXION_KTH(argpartition, "kth"_a,
              "Indices that partition ``a`` around its ``kth`` element.",
              "    kth (int): Index of the element to put in its sorted "
              "place.\n",
              "``uint32`` indices (see :func:`partition`).")
  FLUXION_KTH(topk, "k"_a, "The ``k`` largest elements along an axis.",
              "    k (int): How many elements to keep.\n",
              "The ``k`` largest values along ``axis``, in no particular "
              "order.")
#undef FLUXION_KTH

  auto cls = py::reinterpret_borrow<py::class_<fx::array>>(m.attr("array"));
#define FLUXION_SCAN_ARGS                                                \
  "    axis (int, optional): Axis to scan along; the flattened array\n" \
  "        when omitted.\n"                                              \
  "    reverse (bool, optional): Scan from the end. Default ``False``.\n" \
  "    inclusive (bool, optional): Include element ``i`` in output\n"    \
  "        ``i`` (``False`` shifts by one). Default ``True``.\n"
#define FLUXION_SCAN(NAME, SUMMARY, EXAMPLE)                                \
  m.def(#NAME, &scan<fx::NAME, fx::NAME>, "a"_a, py::pos_only(),            \
        "axis"_a = py::none(), py::kw_only(), "reverse"_a = false,          \
        "inclusive"_a = true, s,                                            \
        SUMMARY FXDOC_ARGS FXDOC_A FLUXION_SCAN_ARGS FXDOC_STREAM            \
            FXDOC_RET_ARRAY "The running values, the shape of ``a`` (or\n" \
        "    flattened).\n" EXAMPLE);                                      \
  cls.def(#NAME, &scan<fx::NAME, fx::NAME>, "axis"_a = py::none(),          \
          py::kw_only(), "reverse"_a = false, "inclusive"_a = true, s,      \
          SUMMARY " See :func:`fluxion.core." #NAME "`." FXDOC_ARGS         \
              FLUXION_SCAN_ARGS FXDOC_STREAM FXDOC_RET_ARRAY                 \
          "The running values.\n");
  FLUXION_SCAN(cumsum, "Cumulative sum along an axis.",
               FXDOC_EXAMPLE
               "    >>> mx.cumsum(mx.array([1, 2, 3])).tolist()\n"
               "    [1, 3, 6]\n")
  FLUXION_SCAN(cumprod, "Cumulative product along an axis.", "")
  FLUXION_SCAN(cummax, "Cumulative maximum along an axis.", "")
  FLUXION_SCAN(cummin, "Cumulative minimum along an axis.", "")
  FLUXION_SCAN(logcumsumexp,
               "Cumulative ``log(sum(exp(a)))`` along an axis, computed "
               "stably.",
               "")
#undef FLUXION_SCAN
#undef FLUXION_SCAN_ARGS
  m.def("cumulative_sum", &cumulative<true>, "a"_a, py::pos_only(),
        "axis"_a = py::none(), py::kw_only(), "dtype"_a = py::none(),
        "include_initial"_a = false, s,
      R"doc(Cumulative sum (the array API's), optionally starting with 0.

Args:
    a (array): Input array.
    axis (int, optional): The axis; the flattened array when omitted.
    dtype (Dtype, optional): Type of the result.
    include_initial (bool, optional): Start with a 0, so the result is
        one longer along ``axis``. Default ``False``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The running sums.
)doc");
  m.def("cumulative_prod", &cumulative<false>, "a"_a, py::pos_only(),
        "axis"_a = py::none(), py::kw_only(), "dtype"_a = py::none(),
        "include_initial"_a = false, s,
      R"doc(Cumulative product (the array API's), optionally starting with 1.

Args:
    a (array): Input array.
    axis (int, optional): The axis; the flattened array when omitted.
    dtype (Dtype, optional): Type of the result.
    include_initial (bool, optional): Start with a 1, so the result is
        one longer along ``axis``. Default ``False``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The running products.
)doc");
  // --- fluxion/ops/searchsorted.h ---
  m.def(
      "searchsorted",
      [](const fx::array& a, const fx::array& v, const std::string& side,
         std::optional<fx::array> sorter, fx::StreamOrDevice st) {
        return fx::searchsorted(a, v, side, sorter, st);
      },
      "a"_a, "v"_a, py::pos_only(), "side"_a = "left", "sorter"_a = py::none(),
      py::kw_only(), s,
      R"doc(Positions at which to insert values into a sorted 1-D array.

As MLX's and NumPy's ``searchsorted``; NaNs sort last. :func:`vmap` maps
over ``v``; mapping over ``a`` raises ``ValueError``.

Args:
    a (array): The 1-D array, sorted ascending (or see ``sorter``).
    v (array): The values, of any shape.
    side (str, optional): ``"left"`` puts a value before equal elements,
        ``"right"`` after them. Default ``"left"``.
    sorter (array, optional): Indices that sort ``a`` (its argsort).
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``uint32`` positions, the shape of ``v``.

Example:
    >>> mx.searchsorted(mx.array([1, 3, 5]), mx.array([3, 4])).tolist()
    [1, 2]
)doc");
}
