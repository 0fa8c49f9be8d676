// Shape ops: reshape, transpose (with the array API's permute_dims and
// matrix_transpose), broadcast (and broadcast_shapes, of
// fluxion/ops/common.h), join/split, pad, tile, and MLX's slice/slice_update
// signatures.
#include "python/src/docs.h"
#include "python/src/ops_common.h"

namespace {

std::vector<int> int_list(py::handle h, const char* op, const char* what) {
  if (auto* p = fxpy::array_ptr(h)) {
    fxpy::eval_nogil(*p);
    std::vector<int> out;
    fx::array flat = fx::astype(fx::reshape(*p, {-1}), fx::int32);
    fxpy::eval_nogil(flat);
    auto* d = flat.data<int32_t>();
    return std::vector<int>(d, d + flat.size());
  }
  try {
    return h.cast<std::vector<int>>();
  } catch (const py::cast_error&) {
    throw std::invalid_argument(std::string("[") + op + "] " + what +
                                " must be a sequence of ints or an array.");
  }
}

// MLX's slice(a, start_indices, axes, slice_size): `slice_size` elements
// from `start_indices` along `axes` (start indices given as an array are
// read now).
fx::array mlx_slice(const fx::array& a, py::handle start_indices,
                    const std::vector<int>& axes,
                    const std::vector<int>& slice_size, fx::StreamOrDevice s) {
  auto starts = int_list(start_indices, "slice", "start_indices");
  if (starts.size() != axes.size() || slice_size.size() != axes.size()) {
    throw std::invalid_argument(
        "[slice] start_indices, axes and slice_size must have the same "
        "length; got " +
        std::to_string(starts.size()) + ", " + std::to_string(axes.size()) +
        " and " + std::to_string(slice_size.size()) + ".");
  }
  fx::Shape start(a.ndim(), 0), stop = a.shape();
  for (size_t i = 0; i < axes.size(); ++i) {
    int ax = fx::normalize_axis(axes[i], a.ndim(), "slice");
    if (starts[i] < 0 || slice_size[i] < 0 ||
        static_cast<int64_t>(starts[i]) + slice_size[i] > a.shape(ax)) {
      throw std::out_of_range(
          "[slice] A slice of size " + std::to_string(slice_size[i]) + " at " +
          std::to_string(starts[i]) + " does not fit axis " +
          std::to_string(ax) + " of size " + std::to_string(a.shape(ax)) + ".");
    }
    start[ax] = starts[i];
    stop[ax] = starts[i] + slice_size[i];
  }
  return fx::slice(a, start, stop, s);
}

fx::array mlx_slice_update(const fx::array& a, const fx::array& update,
                           py::handle start_indices,
                           const std::vector<int>& axes, fx::StreamOrDevice s) {
  auto starts = int_list(start_indices, "slice_update", "start_indices");
  if (starts.size() != axes.size()) {
    throw std::invalid_argument(
        "[slice_update] start_indices and axes must have the same length; "
        "got " +
        std::to_string(starts.size()) + " and " + std::to_string(axes.size()) +
        ".");
  }
  if (update.ndim() != a.ndim()) {
    throw std::invalid_argument(
        "[slice_update] The update must have the array's number of "
        "dimensions; got shapes " +
        fx::shape_str(update.shape()) + " and " + fx::shape_str(a.shape()) +
        ".");
  }
  fx::Shape start(a.ndim(), 0), stop = a.shape();
  for (size_t i = 0; i < axes.size(); ++i) {
    int ax = fx::normalize_axis(axes[i], a.ndim(), "slice_update");
    int64_t end = static_cast<int64_t>(starts[i]) + update.shape(ax);
    if (starts[i] < 0 || end > a.shape(ax)) {
      throw std::out_of_range("[slice_update] An update of size " +
                              std::to_string(update.shape(ax)) + " at " +
                              std::to_string(starts[i]) +
                              " does not fit axis " + std::to_string(ax) +
                              " of size " + std::to_string(a.shape(ax)) + ".");
    }
    start[ax] = starts[i];
    stop[ax] = static_cast<int32_t>(end);
  }
  return fx::slice_update(a, update, start, stop, s);
}

constexpr const char* kPadWidth =
    "an int, a (before, after) pair or a list of pairs";

std::pair<int, int> pad_pair(py::handle h) {
  if (PyLong_Check(h.ptr())) {
    int v = fxpy::cast_arg<int>(h, "pad", "pad_width", kPadWidth);
    return {v, v};
  }
  auto v = fxpy::cast_arg<std::vector<int>>(h, "pad", "pad_width", kPadWidth);
  if (v.size() == 1) {
    return {v[0], v[0]};
  }
  if (v.size() != 2) {
    throw std::invalid_argument(
        "[pad] Each pad width must be an int or a (before, after) pair; got " +
        std::to_string(v.size()) + " values.");
  }
  return {v[0], v[1]};
}

fx::array pad(const fx::array& a, py::handle pad_width, const std::string& mode,
              py::handle constant_values, fx::StreamOrDevice s) {
  fx::array value = fxpy::to_array_like(constant_values, a);
  if (PyLong_Check(pad_width.ptr())) {
    return fx::pad(
        a, fxpy::cast_arg<int>(pad_width, "pad", "pad_width", kPadWidth), value,
        mode, s);
  }
  auto seq =
      fxpy::cast_arg<py::sequence>(pad_width, "pad", "pad_width", kPadWidth);
  bool nested = py::len(seq) > 0 && !PyLong_Check(seq[0].ptr());
  if (!nested) {
    return fx::pad(a, pad_pair(pad_width), value, mode, s);
  }
  std::vector<std::pair<int, int>> widths;
  for (auto item : seq) {
    widths.push_back(pad_pair(item));
  }
  if (widths.size() == 1) {
    // [(lo, hi)] pads every axis alike, as (lo, hi) does (MLX).
    return fx::pad(a, widths[0], value, mode, s);
  }
  return fx::pad(a, widths, value, mode, s);
}

py::object at_least(fx::array (*fn)(const fx::array&, fx::StreamOrDevice),
                    const py::args& arys, fx::StreamOrDevice s) {
  if (arys.size() == 1) {
    return py::cast(fn(fxpy::to_array(arys[0]), s));
  }
  py::list out;
  for (auto a : arys) {
    out.append(fn(fxpy::to_array(a), s));
  }
  return out;
}

}  // namespace

void init_ops_shape(py::module_& m) {
  const auto s = "stream"_a = py::none();
  m.def(
      "reshape",
      [](const fx::array& a, const fx::Shape& shape, fx::StreamOrDevice st) {
        return fx::reshape(a, shape, st);
      },
      "a"_a, py::pos_only(), "shape"_a, py::kw_only(), s,
      R"doc(Give an array a new shape with the same elements.

Args:
    a (array): Input array.
    shape (tuple(int)): The new shape; one entry may be -1 and is then
        inferred from the size.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The elements of ``a`` in row-major order with shape ``shape``.

Example:
    >>> mx.reshape(mx.arange(6), (2, -1)).shape
    (2, 3)
)doc");
  m.def(
      "flatten",
      [](const fx::array& a, int start, int end, fx::StreamOrDevice st) {
        return fx::flatten(a, start, end, st);
      },
      "a"_a, py::pos_only(), "start_axis"_a = 0, "end_axis"_a = -1,
      py::kw_only(), s,
      R"doc(Flatten the axes ``start_axis`` to ``end_axis`` into one.

Args:
    a (array): Input array.
    start_axis (int, optional): First axis to flatten. Default 0.
    end_axis (int, optional): Last axis to flatten (inclusive). Default -1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a`` with those axes merged.

Example:
    >>> mx.flatten(mx.zeros((2, 3, 4)), 1).shape
    (2, 12)
)doc");
  m.def(
      "unflatten",
      [](const fx::array& a, int axis, const fx::Shape& shape,
         fx::StreamOrDevice st) { return fx::unflatten(a, axis, shape, st); },
      "a"_a, py::pos_only(), "axis"_a, "shape"_a, py::kw_only(), s,
      R"doc(Split one axis into several: the inverse of :func:`flatten`.

Args:
    a (array): Input array.
    axis (int): The axis to split.
    shape (tuple(int)): The sizes it splits into (one may be -1); their
        product is the axis' size.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a`` with ``axis`` replaced by ``shape``.
)doc");
  m.def("squeeze", &fxpy::squeeze, "a"_a, py::pos_only(), "axis"_a = py::none(),
        py::kw_only(), s,
      R"doc(Remove axes of size 1.

Args:
    a (array): Input array.
    axis (int or list(int), optional): The axes to remove (each must
        have size 1); every size-1 axis when omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a`` without those axes.
)doc");
  m.def(
      "expand_dims",
      [](const fx::array& a, const std::variant<int, std::vector<int>>& axis,
         fx::StreamOrDevice st) {
        return fx::expand_dims(a, fxpy::axes_vector(axis), st);
      },
      "a"_a, py::pos_only(), "axis"_a, py::kw_only(), s,
      R"doc(Insert axes of size 1.

Args:
    a (array): Input array.
    axis (int or list(int)): Positions of the new axes in the result.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a`` with the new axes.

Example:
    >>> mx.expand_dims(mx.zeros((3,)), 0).shape
    (1, 3)
)doc");
  m.def(
      "transpose",
      [](const fx::array& a, std::optional<std::vector<int>> axes,
         fx::StreamOrDevice st) {
        return axes ? fx::transpose(a, *axes, st) : fx::transpose(a, st);
      },
      "a"_a, py::pos_only(), "axes"_a = py::none(), py::kw_only(), s,
      R"doc(Permute the axes of an array.

Args:
    a (array): Input array.
    axes (list(int), optional): The permutation: axis ``i`` of the result
        is axis ``axes[i]`` of ``a``. Reverses the axes when omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The transposed array (a view).
)doc");
  m.def(
      "swapaxes",
      [](const fx::array& a, int a1, int a2, fx::StreamOrDevice st) {
        return fx::swapaxes(a, a1, a2, st);
      },
      "a"_a, py::pos_only(), "axis1"_a, "axis2"_a, py::kw_only(), s,
      R"doc(Swap two axes of an array.

Args:
    a (array): Input array.
    axis1 (int): First axis.
    axis2 (int): Second axis.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a`` with ``axis1`` and ``axis2`` exchanged.
)doc");
  m.def(
      "permute_dims",
      [](const fx::array& a, std::optional<std::vector<int>> axes,
         fx::StreamOrDevice st) {
        return axes ? fx::transpose(a, *axes, st) : fx::transpose(a, st);
      },
      "a"_a, py::pos_only(), "axes"_a = py::none(), py::kw_only(), s,
      R"doc(Permute the axes (the array API's name of :func:`transpose`).

Args:
    a (array): Input array.
    axes (list(int), optional): The permutation; reversed axes when
        omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The transposed array.
)doc");
  m.def(
      "matrix_transpose",
      [](const fx::array& a, fx::StreamOrDevice st) {
        if (a.ndim() < 2) {
          throw std::invalid_argument(
              "[matrix_transpose] Expected an array with at least two "
              "dimensions; got shape " +
              fx::shape_str(a.shape()) + ".");
        }
        return fx::swapaxes(a, -1, -2, st);
      },
      "a"_a, py::pos_only(), py::kw_only(), s,
      R"doc(Swap the last two axes.

Args:
    a (array): Input with at least two dimensions.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``swapaxes(a, -1, -2)``.
)doc");
  m.def(
      "moveaxis",
      [](const fx::array& a, int src, int dst, fx::StreamOrDevice st) {
        return fx::moveaxis(a, src, dst, st);
      },
      "a"_a, py::pos_only(), "source"_a, "destination"_a, py::kw_only(), s,
      R"doc(Move one axis to a new position, keeping the others in order.

Args:
    a (array): Input array.
    source (int): The axis to move.
    destination (int): Its position in the result.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a`` with the axis moved.
)doc");
  m.def(
      "broadcast_to",
      [](py::handle a, const fxpy::ShapeArg& shape, fx::StreamOrDevice st) {
        return fx::broadcast_to(fxpy::to_array(a), fxpy::to_shape(shape), st);
      },
      "a"_a, py::pos_only(), "shape"_a, py::kw_only(), s,
      R"doc(Broadcast an array to a shape, NumPy's rules.

Args:
    a (array or scalar): Input.
    shape (tuple(int)): The target shape.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a`` broadcast to ``shape`` (no copy until needed).
)doc");
  m.def(
      "broadcast_arrays",
      [](const py::args& arrays, fx::StreamOrDevice st) {
        std::vector<fx::array> in;
        for (auto a : arrays) {
          in.push_back(fxpy::to_array(a));
        }
        return py::tuple(py::cast(fx::broadcast_arrays(in, st)));
      },
      s,
      R"doc(Broadcast several arrays against each other.

Args:
    *arrays (array or scalar): The inputs.
)doc" FXDOC_STREAM R"doc(
Returns:
    tuple(array): The inputs, each broadcast to the common shape.
)doc");
  m.def("slice", &mlx_slice, "a"_a, "start_indices"_a, "axes"_a, "slice_size"_a,
        py::kw_only(), s,
      R"doc(A block of an array: ``slice_size`` elements from ``start_indices`` along ``axes``.

Args:
    a (array): Input array.
    start_indices (array or list(int)): Where the block starts along each
        of ``axes`` (an array is read when the op is built).
    axes (list(int)): The axes sliced.
    slice_size (list(int)): The block's size along each of ``axes``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The block (other axes whole).

Example:
    >>> mx.slice(mx.arange(10), mx.array([2]), [0], [3]).tolist()
    [2, 3, 4]
)doc");
  m.def("slice_update", &mlx_slice_update, "a"_a, "update"_a, "start_indices"_a,
        "axes"_a, py::kw_only(), s,
      R"doc(A copy of an array with a block replaced.

Args:
    a (array): Input array.
    update (array): The block, with ``a``'s number of dimensions.
    start_indices (array or list(int)): Where the block starts along each
        of ``axes``.
    axes (list(int)): The axes of the start indices.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a`` with ``update`` written from ``start_indices``.
)doc");
  auto concatenate = [](const std::vector<fx::array>& arrays,
                        std::optional<int> axis, fx::StreamOrDevice st) {
    if (axis) {
      return fx::concatenate(arrays, *axis, st);
    }
    std::vector<fx::array> flat;
    for (auto& a : arrays) {
      flat.push_back(fx::reshape(a, {-1}, st));
    }
    return fx::concatenate(flat, 0, st);
  };
  m.def("concatenate", concatenate, "arrays"_a, "axis"_a = 0, py::kw_only(), s,
      R"doc(Join arrays along an existing axis.

Args:
    arrays (list(array)): The arrays; their shapes match except along
        ``axis``.
    axis (int or None, optional): The axis to join along; the arrays are
        flattened first when ``None``. Default 0.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The joined array.

Example:
    >>> mx.concatenate([mx.zeros((1, 2)), mx.ones((2, 2))]).shape
    (3, 2)
)doc");
  m.def("concat", concatenate, "arrays"_a, "axis"_a = 0, py::kw_only(), s,
      R"doc(Join arrays along an existing axis (alias of :func:`concatenate`).

Args:
    arrays (list(array)): The arrays; their shapes match except along
        ``axis``.
    axis (int or None, optional): The axis to join along; the arrays are
        flattened first when ``None``. Default 0.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The joined array.
)doc");
  m.def(
      "stack",
      [](const std::vector<fx::array>& arrays, int axis,
         fx::StreamOrDevice st) { return fx::stack(arrays, axis, st); },
      "arrays"_a, "axis"_a = 0, py::kw_only(), s,
      R"doc(Join arrays of one shape along a new axis.

Args:
    arrays (list(array)): The arrays, all of the same shape.
    axis (int, optional): Position of the new axis in the result.
        Default 0.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The stacked array, one more dimension than the inputs.
)doc");
  m.def("split", &fxpy::split, "a"_a, py::pos_only(), "indices_or_sections"_a,
        "axis"_a = 0, py::kw_only(), s,
      R"doc(Split an array into pieces along an axis.

Args:
    a (array): Input array.
    indices_or_sections (int or list(int)): A number of equal pieces (it
        must divide the axis), or the indices at which to cut.
    axis (int, optional): The axis to split. Default 0.
)doc" FXDOC_STREAM R"doc(
Returns:
    list(array): The pieces.

Example:
    >>> [p.shape for p in mx.split(mx.arange(6), [2, 5])]
    [(2,), (3,), (1,)]
)doc");
  m.def("pad", &pad, "a"_a, py::pos_only(), "pad_width"_a,
        "mode"_a = "constant", "constant_values"_a = 0, py::kw_only(), s,
      R"doc(Pad an array at the edges of its axes.

Args:
    a (array): Input array.
    pad_width (int or tuple or list(tuple)): Widths ``(before, after)``:
        one int for every side, one pair for every axis, or a pair per
        axis.
    mode (str, optional): ``"constant"`` (fill with
        ``constant_values``), ``"edge"`` (repeat the edge values),
        ``"reflect"`` (mirror without the edge) or ``"symmetric"``
        (mirror with the edge). Default ``"constant"``.
    constant_values (array or scalar, optional): Fill value. Default 0.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The padded array.
)doc");
  m.def(
      "repeat",
      [](const fx::array& a, int repeats, std::optional<int> axis,
         fx::StreamOrDevice st) {
        return axis ? fx::repeat(a, repeats, *axis, st)
                    : fx::repeat(a, repeats, st);
      },
      "array"_a, py::pos_only(), "repeats"_a, "axis"_a = py::none(),
      py::kw_only(), s,
      R"doc(Repeat each element of an array.

Args:
    array (array): Input array.
    repeats (int): How many times each element is repeated.
    axis (int, optional): The axis along which to repeat; the flattened
        array when omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The array with each element repeated ``repeats`` times.
)doc");
  m.def(
      "tile",
      [](const fx::array& a, const std::variant<int, std::vector<int>>& reps,
         fx::StreamOrDevice st) {
        return fx::tile(a, fxpy::axes_vector(reps), st);
      },
      "a"_a, py::pos_only(), "reps"_a, py::kw_only(), s,
      R"doc(Tile an array: repeat the whole array along each axis.

Args:
    a (array): Input array.
    reps (int or list(int)): Repetitions per axis (aligned to the last
        axes; ``a`` gains leading axes when ``reps`` is longer).
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The tiled array.
)doc");
  m.def(
      "atleast_1d",
      [](const py::args& arys, fx::StreamOrDevice st) {
        return at_least(&fx::atleast_1d, arys, st);
      },
      s,
      R"doc(View inputs as arrays with at least one dimension.

Args:
    *arys (array or scalar): The inputs.
)doc" FXDOC_STREAM R"doc(
Returns:
    array or list(array): One array for one input, else a list.
)doc");
  m.def(
      "atleast_2d",
      [](const py::args& arys, fx::StreamOrDevice st) {
        return at_least(&fx::atleast_2d, arys, st);
      },
      s,
      R"doc(View inputs as arrays with at least two dimensions.

Args:
    *arys (array or scalar): The inputs.
)doc" FXDOC_STREAM R"doc(
Returns:
    array or list(array): One array for one input, else a list.
)doc");
  m.def(
      "atleast_3d",
      [](const py::args& arys, fx::StreamOrDevice st) {
        return at_least(&fx::atleast_3d, arys, st);
      },
      s,
      R"doc(View inputs as arrays with at least three dimensions.

Args:
    *arys (array or scalar): The inputs.
)doc" FXDOC_STREAM R"doc(
Returns:
    array or list(array): One array for one input, else a list.
)doc");
  m.def(
      "broadcast_shapes",
      [](py::args shapes) {
        if (shapes.size() == 0) {
          throw std::invalid_argument(
              "[broadcast_shapes] Expected at least one shape.");
        }
        fx::Shape out;
        for (auto h : shapes) {
          out = fx::broadcast_shapes(out, h.cast<fx::Shape>(),
                                     "broadcast_shapes");
        }
        return py::tuple(py::cast(out));
      },
      R"doc(The shape that the given shapes broadcast to.

Args:
    *shapes (tuple(int)): At least one shape.

Returns:
    tuple(int): The broadcast shape; ``ValueError`` if they do not
    broadcast.

Example:
    >>> mx.broadcast_shapes((2, 1), (3,))
    (2, 3)
)doc");
}
