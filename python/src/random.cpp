// The mx.random submodule: keys, the global seed and the samplers.
#include <chrono>

#include "python/src/docs.h"
#include "python/src/ops_common.h"

namespace fr = fluxion::random;

namespace {

// mx.random.state: a list whose item 0 is the global key. Python's samplers
// take their keys from it (not from the C++ global sequence), so that code
// may save, restore or capture the state as MLX allows. Each draw splits
// the key on the host, as the C++ sequence does (MLX's split): row 0 stays,
// row 1 is handed out.
py::list& state() {
  static auto* s = new py::list();
  return *s;
}

std::pair<uint32_t, uint32_t> key_words(const fx::array& k) {
  fx::array a = k;
  if (a.dtype() != fx::uint32 || a.shape() != fx::Shape{2}) {
    a = fx::astype(fx::reshape(a, {2}), fx::uint32);
  }
  // Reading an unevaluated key releases the GIL (see next_key).
  py::list w = fxpy::to_list(a);
  return {w[0].cast<uint32_t>(), w[1].cast<uint32_t>()};
}

fx::array words_key(std::pair<uint32_t, uint32_t> w) {
  return fx::array({w.first, w.second}, {2}, fx::uint32);
}

fx::array next_key() {
  // The GIL guards the list, but evaluating a key a user stored there lets
  // other threads run: take the key only if nobody replaced it meanwhile,
  // so that two threads never draw with the same key.
  while (true) {
    py::object current = state()[0];
    fx::array k = fxpy::to_array(current);
    if (k.is_tracer()) {
      // Under compile the state is an input of the trace: split lazily.
      auto [next, draw] = fr::split(k);
      state()[0] = py::cast(next);
      return draw;
    }
    auto key = key_words(k);
    if (state()[0].ptr() != current.ptr()) {
      continue;
    }
    // Rows 0 and 1 of split(key, 2) (MLX): the halves of threefry2x32 at
    // counters (0, 2) and (1, 3).
    auto a = fr::threefry2x32(key, {0, 2});
    auto b = fr::threefry2x32(key, {1, 3});
    state()[0] = py::cast(words_key({a.first, b.first}));
    return words_key({a.second, b.second});
  }
}

fx::array resolve(const std::optional<fx::array>& k) {
  return k ? *k : next_key();
}

}  // namespace

void init_random(py::module_& parent) {
  auto m = parent.def_submodule(
      "random",
      "Random sampling with explicit keys (threefry) or the global state.");
  const auto s = "stream"_a = py::none();
  const auto key = "key"_a = py::none();
  m.def("key", &fr::key, "seed"_a,
      R"doc(Make a PRNG key from a seed.

Args:
    seed (int): The seed.

Returns:
    array: A ``uint32`` key of shape ``(2,)``.

Example:
    >>> k = mx.random.key(0)
    >>> a = mx.random.uniform(shape=(3,), key=k)
)doc");
  state().append(py::cast(fr::key(static_cast<uint64_t>(
      std::chrono::system_clock::now().time_since_epoch().count()))));
  m.attr("state") = state();
  m.def(
      "seed",
      [](uint64_t seed) {
        fr::seed(seed);
        state()[0] = py::cast(fr::key(seed));
      },
      "seed"_a,
      R"doc(Seed the global PRNG state (``mx.random.state[0]``).

Args:
    seed (int): The seed; sampling without a key is then reproducible.
)doc");
  m.def(
      "split",
      [](const fx::array& k, int num, fx::StreamOrDevice st) {
        return fr::split(k, num, st);
      },
      "key"_a, "num"_a = 2, s,
      R"doc(Split a key into new independent keys.

Args:
    key (array): The key to split.
    num (int, optional): How many keys. Default 2.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The keys, shape ``(num, 2)``.
)doc");
  m.def(
      "bits",
      [](const fxpy::ShapeArg& shape, int width, std::optional<fx::array> k,
         fx::StreamOrDevice st) {
        return fr::bits(fxpy::to_shape(shape), width, resolve(k), st);
      },
      "shape"_a = fx::Shape{}, "width"_a = 4, key, s,
      R"doc(Random bits.

Args:
    shape (int or tuple(int), optional): Shape of the samples. Default ``()``.
    width (int, optional): Bytes per element: 1, 2 or 4 (``uint8``,
        ``uint16`` or ``uint32``). Default 4.
)doc" FXDOC_KEY FXDOC_STREAM R"doc(
Returns:
    array: Uniformly random unsigned integers.
)doc");
  m.def(
      "uniform",
      [](py::handle low, py::handle high, const fxpy::ShapeArg& shape,
         std::optional<fx::Dtype> dtype, std::optional<fx::array> k,
         fx::StreamOrDevice st) {
        fx::Dtype t = dtype.value_or(fx::float32);
        return fr::uniform(fxpy::to_array(low, t), fxpy::to_array(high, t),
                           fxpy::to_shape(shape), t, resolve(k), st);
      },
      "low"_a = 0, "high"_a = 1, "shape"_a = fx::Shape{},
      "dtype"_a = fx::float32, key, s,
      R"doc(Uniform samples in the half-open interval ``[low, high)``.

Args:
    low (array or scalar, optional): Lower bound. Default 0.
    high (array or scalar, optional): Upper bound. Default 1.
    shape (int or tuple(int), optional): Shape of the samples. Default ``()``; ``low`` and ``high`` broadcast to it.
    dtype (Dtype, optional): A floating type. Default ``float32``.
)doc" FXDOC_KEY FXDOC_STREAM R"doc(
Returns:
    array: The samples.

Example:
    >>> mx.random.uniform(-1, 1, (2, 3)).shape
    (2, 3)
)doc");
  m.def(
      "normal",
      [](const fxpy::ShapeArg& shape, std::optional<fx::Dtype> dtype,
         py::handle loc, py::handle scale, std::optional<fx::array> k,
         fx::StreamOrDevice st) {
        fx::Dtype t = dtype.value_or(fx::float32);
        auto param = [&](py::handle h) -> std::optional<fx::array> {
          if (h.is_none()) {
            return std::nullopt;
          }
          return fxpy::to_array(h, fxpy::array_ptr(h)
                                       ? std::optional<fx::Dtype>{}
                                       : std::optional<fx::Dtype>{t});
        };
        auto locv = param(loc);
        auto scalev = param(scale);
        return fr::normal(fxpy::to_shape(shape), t, locv, scalev, resolve(k),
                          st);
      },
      "shape"_a = fx::Shape{}, "dtype"_a = fx::float32, "loc"_a = py::none(),
      "scale"_a = py::none(), key, s,
      R"doc(Normal samples ``loc + scale * z`` with ``z`` standard normal.

Args:
    shape (int or tuple(int), optional): Shape of the samples. Default ``()``.
    dtype (Dtype, optional): A floating type. Default ``float32``.
    loc (array or scalar, optional): Mean. Default 0.
    scale (array or scalar, optional): Standard deviation. Default 1.
)doc" FXDOC_KEY FXDOC_STREAM R"doc(
Returns:
    array: The samples.
)doc");
  m.def(
      "randint",
      [](py::handle low, py::handle high, const fxpy::ShapeArg& shape,
         std::optional<fx::Dtype> dtype, std::optional<fx::array> k,
         fx::StreamOrDevice st) {
        fx::Dtype t = dtype.value_or(fx::int32);
        return fr::randint(fxpy::to_array(low), fxpy::to_array(high),
                           fxpy::to_shape(shape), t, resolve(k), st);
      },
      "low"_a, "high"_a, "shape"_a = fx::Shape{}, "dtype"_a = fx::int32, key, s,
      R"doc(Random integers in the half-open interval ``[low, high)``.

Args:
    low (array or int): Lower bound (included).
    high (array or int): Upper bound (excluded).
    shape (int or tuple(int), optional): Shape of the samples. Default ``()``.
    dtype (Dtype, optional): An integer type. Default ``int32``.
)doc" FXDOC_KEY FXDOC_STREAM R"doc(
Returns:
    array: The samples.
)doc");
  m.def(
      "bernoulli",
      [](py::handle p, std::optional<fxpy::ShapeArg> shape,
         std::optional<fx::array> k, fx::StreamOrDevice st) {
        // p must be a floating probability (MLX: an int p raises).
        fx::array pa = fxpy::to_array(p);
        return shape ? fr::bernoulli(pa, fxpy::to_shape(*shape), resolve(k), st)
                     : fr::bernoulli(pa, resolve(k), st);
      },
      "p"_a = 0.5, "shape"_a = py::none(), key, s,
      R"doc(Booleans that are ``True`` with probability ``p``.

Args:
    p (array or float, optional): The probability (a float or floating
        array). Default 0.5.
    shape (int or tuple(int), optional): Shape of the samples; that of
        ``p`` when omitted.
)doc" FXDOC_KEY FXDOC_STREAM R"doc(
Returns:
    array: A ``bool`` array.
)doc");
  m.def(
      "truncated_normal",
      [](py::handle lower, py::handle upper,
         std::optional<fxpy::ShapeArg> shape, std::optional<fx::Dtype> dtype,
         std::optional<fx::array> k, fx::StreamOrDevice st) {
        fx::Dtype t = dtype.value_or(fx::float32);
        std::optional<fx::Shape> sh;
        if (shape) {
          sh = fxpy::to_shape(*shape);
        }
        return fr::truncated_normal(fxpy::to_array(lower, t),
                                    fxpy::to_array(upper, t), sh, t, resolve(k),
                                    st);
      },
      "lower"_a, "upper"_a, "shape"_a = py::none(), "dtype"_a = fx::float32,
      key, s,
      R"doc(Standard normal samples restricted to ``[lower, upper]``.

Args:
    lower (array or scalar): Lower bound.
    upper (array or scalar): Upper bound.
    shape (int or tuple(int), optional): Shape of the samples; the
        broadcast shape of the bounds when omitted.
    dtype (Dtype, optional): A floating type. Default ``float32``.
)doc" FXDOC_KEY FXDOC_STREAM R"doc(
Returns:
    array: The samples.
)doc");
  m.def(
      "gumbel",
      [](const fxpy::ShapeArg& shape, std::optional<fx::Dtype> dtype,
         std::optional<fx::array> k, fx::StreamOrDevice st) {
        return fr::gumbel(fxpy::to_shape(shape), dtype.value_or(fx::float32),
                          resolve(k), st);
      },
      "shape"_a = fx::Shape{}, "dtype"_a = fx::float32, key, s,
      R"doc(Samples of the standard Gumbel distribution.

Args:
    shape (int or tuple(int), optional): Shape of the samples. Default ``()``.
    dtype (Dtype, optional): A floating type. Default ``float32``.
)doc" FXDOC_KEY FXDOC_STREAM R"doc(
Returns:
    array: The samples.
)doc");
  m.def(
      "laplace",
      [](const fxpy::ShapeArg& shape, std::optional<fx::Dtype> dtype, float loc,
         float scale, std::optional<fx::array> k, fx::StreamOrDevice st) {
        return fr::laplace(fxpy::to_shape(shape), dtype.value_or(fx::float32),
                           loc, scale, resolve(k), st);
      },
      "shape"_a = fx::Shape{}, "dtype"_a = fx::float32, "loc"_a = 0.0f,
      "scale"_a = 1.0f, key, s,
      R"doc(Samples of the Laplace distribution.

Args:
    shape (int or tuple(int), optional): Shape of the samples. Default ``()``.
    dtype (Dtype, optional): A floating type. Default ``float32``.
    loc (float, optional): Location (mean). Default 0.
    scale (float, optional): Scale. Default 1.
)doc" FXDOC_KEY FXDOC_STREAM R"doc(
Returns:
    array: The samples.
)doc");
  m.def(
      "categorical",
      [](py::handle logits, int axis, std::optional<fxpy::ShapeArg> shape,
         std::optional<int> num_samples, std::optional<fx::array> k,
         fx::StreamOrDevice st) {
        std::optional<fx::Shape> sh;
        if (shape) {
          sh = fxpy::to_shape(*shape);
        }
        return fr::categorical(fxpy::to_array(logits), axis, sh, num_samples,
                               resolve(k), st);
      },
      "logits"_a, "axis"_a = -1, "shape"_a = py::none(),
      "num_samples"_a = py::none(), key, s,
      R"doc(Sample category indices with probabilities ``softmax(logits)``.

Args:
    logits (array): Unnormalised log-probabilities.
    axis (int, optional): The axis of the categories. Default -1.
    shape (int or tuple(int), optional): Shape of the result (broadcast
        with ``logits`` without ``axis``).
    num_samples (int, optional): Samples per distribution, as a new last
        axis (not with ``shape``).
)doc" FXDOC_KEY FXDOC_STREAM R"doc(
Returns:
    array: ``uint32`` indices.
)doc");
  m.def(
      "permutation",
      [](py::handle x, int axis, std::optional<fx::array> k,
         fx::StreamOrDevice st) {
        if (py::isinstance<py::int_>(x) && !py::isinstance<py::bool_>(x)) {
          return fr::permutation(x.cast<int>(), resolve(k), st);
        }
        return fr::permutation(fxpy::to_array(x), axis, resolve(k), st);
      },
      "x"_a, "axis"_a = 0, key, s,
      R"doc(A random permutation of ``arange(x)``, or of ``x`` along an axis.

Args:
    x (int or array): A length, or the array to shuffle.
    axis (int, optional): The axis to shuffle. Default 0.
)doc" FXDOC_KEY FXDOC_STREAM R"doc(
Returns:
    array: The permuted indices or array.
)doc");
  m.def(
      "multivariate_normal",
      [](py::handle mean, py::handle cov, const fxpy::ShapeArg& shape,
         std::optional<fx::Dtype> dtype, std::optional<fx::array> k,
         fx::StreamOrDevice st) {
        return fr::multivariate_normal(
            fxpy::to_array(mean), fxpy::to_array(cov), fxpy::to_shape(shape),
            dtype.value_or(fx::float32), resolve(k), st);
      },
      "mean"_a, "cov"_a, "shape"_a = fx::Shape{}, "dtype"_a = fx::float32, key,
      s,
      R"doc(Samples of a multivariate normal distribution.

Args:
    mean (array): Mean vector(s), shape ``(..., n)``.
    cov (array): Covariance matrix (matrices), shape ``(..., n, n)``,
        symmetric positive semi-definite.
    shape (tuple(int), optional): Batch shape of the samples (broadcast
        with the batch shapes of ``mean`` and ``cov``). Default ``()``.
    dtype (Dtype, optional): A floating type. Default ``float32``.
)doc" FXDOC_KEY FXDOC_STREAM R"doc(
Returns:
    array: Samples of shape ``shape + (n,)``.
)doc");
}
