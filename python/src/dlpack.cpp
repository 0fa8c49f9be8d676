// DLPack exchange: `array.__dlpack__` (the legacy capsule for consumers
// that ask for no version, DLPack 1.0's versioned one for those passing
// max_version >= (1, 0), as NumPy 2 and recent PyTorch do),
// `__dlpack_device__`, and `mx.from_dlpack` for any producer. Arrays
// whose buffer lives on a GPU are exchanged as CUDA tensors without a copy
// (kDLCUDA), in both directions.
// The ABI structs are declared here: no DLPack header ships with Debian.
#include <cstring>

#include "fluxion/backend_interface.h"
#include "python/src/convert.h"
#include "python/src/gil_release.h"

namespace {

constexpr int32_t kDLCPU = 1;
constexpr int32_t kDLCUDA = 2;
constexpr int32_t kDLCUDAHost = 3;
constexpr uint64_t kReadOnly = 1ull << 0;
constexpr uint64_t kIsCopied = 1ull << 1;

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

// What an exported capsule owns: a handle to the array (so the buffer lives
// as long as the consumer's tensor) and the shape/stride storage.
struct DLHold {
  fx::array a;
  std::vector<int64_t> shape, strides;
  DLManagedTensor legacy;
  DLManagedTensorVersioned versioned;
};

uint8_t dl_code(fx::Dtype t) {
  switch (fx::kindof(t)) {
    case fx::Dtype::Kind::b:
      return 6;
    case fx::Dtype::Kind::u:
      return 1;
    case fx::Dtype::Kind::i:
      return 0;
    case fx::Dtype::Kind::f:
      return 2;
    case fx::Dtype::Kind::V:
      return 4;
    default:
      return 5;
  }
}

fx::Dtype dtype_from_dl(DLDataType d) {
  if (d.lanes != 1) {
    throw std::invalid_argument("[from_dlpack] Vector dtypes (lanes = " +
                                std::to_string(d.lanes) +
                                ") are not supported.");
  }
  switch (d.code * 1000 + d.bits) {
    case 6008:
    case 1001:  // some producers mark bool as 1-bit unsigned
      return fx::bool_;
    case 1008:
      return fx::uint8;
    case 1016:
      return fx::uint16;
    case 1032:
      return fx::uint32;
    case 1064:
      return fx::uint64;
    case 8:
      return fx::int8;
    case 16:
      return fx::int16;
    case 32:
      return fx::int32;
    case 64:
      return fx::int64;
    case 2016:
      return fx::float16;
    case 2032:
      return fx::float32;
    case 2064:
      return fx::float64;
    case 4016:
      return fx::bfloat16;
    case 5064:
      return fx::complex64;
  }
  throw std::invalid_argument(
      "[from_dlpack] Unsupported DLPack dtype (code " + std::to_string(d.code) +
      ", " + std::to_string(d.bits) + " bits).");
}

bool is_broadcast(const fx::array& a) {
  for (int i = 0; i < a.ndim(); ++i) {
    if (a.strides()[i] == 0 && a.shape(i) > 1) {
      return true;
    }
  }
  return false;
}

// Where an evaluated array's buffer lives, as a DLPack device.
std::pair<int, int> dl_home(const fx::array& a) {
  fx::Device d = a.home_device();
  return d.type == fx::Device::gpu ? std::pair{kDLCUDA, d.index}
                                   : std::pair{kDLCPU, 0};
}

// The device to export `a` on: its home, or the one the consumer asks for
// (the CPU always works: a GPU buffer is read through its host copy).
std::pair<int, int> export_device(const fx::array& a, py::object dl_device) {
  auto home = dl_home(a);
  if (dl_device.is_none()) {
    return home;
  }
  auto dev = fxpy::cast_arg<std::pair<int, int>>(
      dl_device, "__dlpack__", "dl_device", "a (device_type, device_id) tuple");
  if (dev == home || dev == std::pair{kDLCPU, 0}) {
    return dev;
  }
  throw py::buffer_error(
      "[__dlpack__] Cannot export to DLPack device (" +
      std::to_string(dev.first) + ", " + std::to_string(dev.second) +
      "): the array lives on (" + std::to_string(home.first) + ", " +
      std::to_string(home.second) + ").");
}

py::capsule to_dlpack(const fx::array& in, py::object max_version,
                      py::object dl_device, py::object copy) {
  bool copied =
      !copy.is_none() &&
      fxpy::cast_arg<bool>(copy, "__dlpack__", "copy", "a bool or None");
  fxpy::eval_nogil(in);
  // The copy is made where the array lives. eval waits for the kernels, so
  // the buffer is complete on every CUDA stream a consumer may name.
  fx::array a = copied ? fx::copy(in, in.home_device()) : in;
  fxpy::eval_nogil(a);
  const auto device = export_device(a, dl_device);
  bool versioned = false;
  if (!max_version.is_none()) {
    versioned =
        fxpy::cast_arg<std::pair<int, int>>(
            max_version, "__dlpack__", "max_version", "a (major, minor) tuple")
            .first >= 1;
  }
  auto* hold = new DLHold{a, {}, {}, {}, {}};
  for (int i = 0; i < a.ndim(); ++i) {
    hold->shape.push_back(a.shape(i));
    hold->strides.push_back(a.strides()[i]);
  }
  DLTensor t;
  t.data = device.first == kDLCUDA
               ? hold->a.data_on(fx::Device(fx::Device::gpu, device.second))
               : hold->a.raw_data();
  t.device = {device.first, device.second};
  t.ndim = a.ndim();
  t.dtype = {dl_code(a.dtype()), static_cast<uint8_t>(a.itemsize() * 8), 1};
  t.shape = hold->shape.data();
  t.strides = hold->strides.data();
  t.byte_offset = 0;
  // A consumer renames the capsule to "used_..." and takes over the
  // deleter; an unconsumed capsule frees the tensor itself.
  PyObject* cap;
  if (versioned) {
    auto& m = hold->versioned;
    m.version = {1, 0};
    m.manager_ctx = hold;
    m.deleter = [](DLManagedTensorVersioned* self) {
      delete static_cast<DLHold*>(self->manager_ctx);
    };
    m.flags = (is_broadcast(a) ? kReadOnly : 0) | (copied ? kIsCopied : 0);
    m.dl_tensor = t;
    cap = PyCapsule_New(&m, "dltensor_versioned", [](PyObject* c) {
      if (PyCapsule_IsValid(c, "dltensor_versioned")) {
        auto* m = static_cast<DLManagedTensorVersioned*>(
            PyCapsule_GetPointer(c, "dltensor_versioned"));
        m->deleter(m);
      }
    });
  } else {
    auto& m = hold->legacy;
    m.manager_ctx = hold;
    m.deleter = [](DLManagedTensor* self) {
      delete static_cast<DLHold*>(self->manager_ctx);
    };
    m.dl_tensor = t;
    cap = PyCapsule_New(&m, "dltensor", [](PyObject* c) {
      if (PyCapsule_IsValid(c, "dltensor")) {
        auto* m =
            static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
        m->deleter(m);
      }
    });
  }
  if (!cap) {
    delete hold;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(cap);
}

// A DLPack dtype as Fluxion's (MLX's import mapping): float64 and
// complex128 arrive as float32 and complex64, as NumPy arrays do. `source`
// is the element size read from the producer (16 for complex128).
struct ImportType {
  fx::Dtype target;
  bool wide_complex = false;  // complex128 -> complex64
  bool narrow_float = false;  // float64 -> float32
};

ImportType import_type(DLDataType d) {
  if (d.lanes == 1 && d.code == 5 && d.bits == 128) {
    return {fx::complex64, true, false};
  }
  fx::Dtype t = dtype_from_dl(d);
  if (t == fx::float64) {
    return {fx::float32, false, true};
  }
  return {t};
}

// Slots spanned by a layout with non-negative strides, as the array's
// data_size: the element count only when the elements are dense (then the
// flat kernels may use it), else different from it.
size_t span_data_size(const fx::Shape& shape, const fx::Strides& strides) {
  int64_t size = 1, span = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    size *= shape[i];
    if (shape[i] == 0) {
      return 0;
    }
    span += int64_t{shape[i] - 1} * strides[i];
  }
  if (span != size) {
    return static_cast<size_t>(span);
  }
  // Same count: dense exactly when sorted strides are the running products.
  std::vector<std::pair<int64_t, int64_t>> dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] > 1) {
      dims.emplace_back(strides[i], shape[i]);
    }
  }
  std::sort(dims.begin(), dims.end());
  int64_t expect = 1;
  for (auto& [st, n] : dims) {
    if (st != expect) {
      return static_cast<size_t>(span + 1);  // overlapping: never flat
    }
    expect *= n;
  }
  return static_cast<size_t>(span);
}

// A strided CPU tensor to import: its first element, shape, strides in
// elements (non-negative), element type and how to release it.
struct Imported {
  char* data;
  fx::Shape shape;
  fx::Strides strides;
  ImportType type;
  int64_t src_item;
  std::function<void()> release;
};

// Without a copy (copy != true and no dtype conversion) the array uses the
// producer's memory with its strides, released when the last Fluxion array
// using it is gone; otherwise the elements are copied (converted) into a
// fresh row-major buffer and the producer's memory is released at once.
// copy == false with a needed conversion raises.
fx::array adopt_cuda(Imported im, int device, std::optional<bool> copy,
                     const std::string& what);

// The deleter of memory taken from a producer: its release, under the GIL
// (it may touch Python objects).
fx::Data::Deleter producer_deleter(std::function<void()> release) {
  auto owner = std::make_shared<std::function<void()>>(std::move(release));
  return [owner](void*) { fxpy::release_under_gil([owner] { (*owner)(); }); };
}

// The producer's memory as an array of `stored` elements on `device`, with
// the producer's strides; borrowed, so no kernel writes it (donation).
fx::array borrow(const Imported& im, fx::Dtype stored,
                 fx::Data::Deleter deleter, fx::Device device) {
  fx::array out(im.data, im.shape, stored, std::move(deleter), device);
  out.data_shared_ptr()->mark_borrowed();
  if (out.size() > 0 && im.strides != fx::row_major_strides(im.shape)) {
    size_t ds = span_data_size(im.shape, im.strides);
    out.copy_shared_buffer(out, im.strides,
                           fx::layout_flags(im.shape, im.strides, ds), ds);
  }
  return out;
}

fx::array adopt_or_copy(Imported im, std::optional<bool> copy,
                        const std::string& what) {
  const ImportType& it = im.type;
  int64_t size = 1;
  for (int d : im.shape) {
    size *= d;
  }
  bool convert = it.wide_complex || it.narrow_float;
  auto deleter = producer_deleter(std::move(im.release));
  if (convert && copy && !*copy) {
    deleter(nullptr);
    throw std::invalid_argument(
        "[from_dlpack] copy=False, but " + what + " is imported as " +
        fx::dtype_name(it.target) + ", which needs a copy.");
  }
  const auto& shape = im.shape;
  const auto& strides = im.strides;
  if (!convert && !(copy && *copy)) {
    return borrow(im, it.target, std::move(deleter),
                  fx::Device(fx::Device::cpu));
  }
  // Copy: gather the elements in row-major order, then convert.
  const int64_t item = im.src_item;
  const int nd = static_cast<int>(shape.size());
  std::vector<char> gathered(static_cast<size_t>(size * item));
  std::vector<int64_t> idx(nd, 0);
  for (int64_t n = 0; n < size; ++n) {
    int64_t off = 0;
    for (int i = 0; i < nd; ++i) {
      off += idx[i] * strides[i];
    }
    std::memcpy(gathered.data() + n * item, im.data + off * item, item);
    for (int i = nd - 1; i >= 0; --i) {
      if (++idx[i] < shape[i]) {
        break;
      }
      idx[i] = 0;
    }
  }
  deleter(nullptr);
  size_t nbytes = std::max<size_t>(size * it.target.size, 1);
  char* dst = static_cast<char*>(fx::allocator::malloc(nbytes));
  fx::array out(dst, shape, it.target,
                [nbytes](void* q) { fx::allocator::free(q, nbytes); });
  if (it.wide_complex) {
    const double* src = reinterpret_cast<const double*>(gathered.data());
    auto* o = reinterpret_cast<fx::complex64_t*>(dst);
    for (int64_t n = 0; n < size; ++n) {
      o[n] = fx::complex64_t(static_cast<float>(src[2 * n]),
                             static_cast<float>(src[2 * n + 1]));
    }
  } else if (it.narrow_float) {
    fx::convert_elements(gathered.data(), fx::float64, dst, fx::float32,
                         static_cast<size_t>(size));
  } else {
    std::memcpy(dst, gathered.data(), gathered.size());
  }
  return out;
}

fx::Shape checked_shape(const int64_t* dims, int nd, const char* op) {
  fx::Shape shape;
  for (int i = 0; i < nd; ++i) {
    if (dims[i] < 0 || dims[i] > INT32_MAX) {
      throw std::invalid_argument(std::string("[") + op + "] Dimension " +
                                  std::to_string(dims[i]) +
                                  " does not fit in int32.");
    }
    shape.push_back(static_cast<int32_t>(dims[i]));
  }
  return shape;
}

void check_strides(const std::vector<int64_t>& st) {
  for (int64_t x : st) {
    if (x < 0) {
      throw std::invalid_argument(
          "[from_dlpack] Negative strides are not supported; got strides " +
          fx::vec_str(st) + " (copy the tensor first).");
    }
  }
}

// The producer's tensor, consumed (see adopt_or_copy).
fx::array from_capsule(py::capsule cap, std::optional<bool> copy) {
  const char* name = PyCapsule_GetName(cap.ptr());
  bool versioned = name && std::strcmp(name, "dltensor_versioned") == 0;
  if (!name ||
      (!versioned && std::strcmp(name, "dltensor") != 0)) {
    throw std::invalid_argument(
        "[from_dlpack] Expected an unconsumed DLPack capsule; got one named '" +
        std::string(name ? name : "") + "'.");
  }
  DLTensor* t;
  std::function<void()> release;
  if (versioned) {
    auto* m = static_cast<DLManagedTensorVersioned*>(
        PyCapsule_GetPointer(cap.ptr(), name));
    if (m->version.major > 1) {
      throw std::invalid_argument("[from_dlpack] DLPack version " +
                                  std::to_string(m->version.major) +
                                  " is newer than the supported 1.x.");
    }
    t = &m->dl_tensor;
    release = [m] {
      if (m->deleter) {
        m->deleter(m);
      }
    };
  } else {
    auto* m =
        static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), name));
    t = &m->dl_tensor;
    release = [m] {
      if (m->deleter) {
        m->deleter(m);
      }
    };
  }
  const int dev_type = t->device.device_type;
  if (dev_type != kDLCPU && dev_type != kDLCUDAHost && dev_type != kDLCUDA) {
    throw std::invalid_argument(
        "[from_dlpack] Only CPU and CUDA tensors can be imported; got DLPack "
        "device type " +
        std::to_string(dev_type) + ".");
  }
  if (dev_type == kDLCUDA &&
      (t->device.device_id < 0 ||
       t->device.device_id >= fx::device_count(fx::Device::gpu))) {
    throw std::invalid_argument(
        "[from_dlpack] The tensor lives on CUDA device " +
        std::to_string(t->device.device_id) + ", but " +
        std::to_string(fx::device_count(fx::Device::gpu)) +
        " GPUs are visible to Fluxion.");
  }
  Imported im{static_cast<char*>(t->data) + t->byte_offset,
              checked_shape(t->shape, t->ndim, "from_dlpack"),
              {},
              import_type(t->dtype),
              t->dtype.bits / 8,
              {}};
  // Strides in elements: given, or row-major when null (DLPack < 1.2).
  im.strides = fx::row_major_strides(im.shape);
  if (t->strides) {
    std::vector<int64_t> st(t->strides, t->strides + t->ndim);
    check_strides(st);
    im.strides = fx::Strides(st.begin(), st.end());
  }
  const std::string what =
      std::string("a tensor of DLPack dtype (code ") +
      std::to_string(t->dtype.code) +
      ", " + std::to_string(t->dtype.bits) + " bits)";
  // The capsule is consumed from here on: the deleter is ours to call.
  PyCapsule_SetName(cap.ptr(), versioned ? "used_dltensor_versioned"
                                         : "used_dltensor");
  im.release = std::move(release);
  if (dev_type == kDLCUDA) {
    return adopt_cuda(std::move(im), t->device.device_id, copy, what);
  }
  return adopt_or_copy(std::move(im), copy, what);
}

// A CUDA tensor: its memory becomes the array's GPU buffer (released with
// the last array using it); a copy, or the float64 -> float32 conversion
// of MLX's import rule, is then a lazy GPU copy of that array.
fx::array adopt_cuda(Imported im, int device, std::optional<bool> copy,
                     const std::string& what) {
  const ImportType& it = im.type;
  auto deleter = producer_deleter(std::move(im.release));
  const bool convert = it.wide_complex || it.narrow_float;
  if (it.wide_complex || (convert && copy && !*copy)) {
    deleter(nullptr);
    throw std::invalid_argument(
        "[from_dlpack] " + what +
        (it.wide_complex
             ? " on a GPU is complex128, which has no GPU conversion: "
               "convert it to complex64 first."
             : " is imported as float32, which needs a copy (copy=False)."));
  }
  const fx::Device gpu(fx::Device::gpu, device);
  const fx::Dtype stored = it.narrow_float ? fx::float64 : it.target;
  fx::array out = borrow(im, stored, std::move(deleter), gpu);
  if (it.narrow_float) {
    return fx::astype(out, fx::float32, gpu);
  }
  return copy && *copy ? fx::copy(out, gpu) : out;
}

// The DLPack type of a PEP 3118 format ("<f", "?", "Zd", ...).
DLDataType dl_type_of_format(const std::string& fmt, int64_t itemsize) {
  size_t i = 0;
  if (i < fmt.size() && std::strchr("@=<!", fmt[i])) {
    if (fmt[i] == '!') {
      throw std::invalid_argument("[from_dlpack] Big-endian buffers (format '" +
                                  fmt + "') are not supported.");
    }
    ++i;
  }
  std::string f = fmt.substr(i);
  auto bits = static_cast<uint8_t>(itemsize * 8);
  if (f == "?") {
    return {6, 8, 1};
  }
  if (f.size() == 1 && std::strchr("bhilq", f[0])) {
    return {0, bits, 1};
  }
  if (f.size() == 1 && std::strchr("BHILQ", f[0])) {
    return {1, bits, 1};
  }
  if (f == "e" || f == "f" || f == "d") {
    return {2, bits, 1};
  }
  if (f == "Zf" || f == "Zd") {
    return {5, bits, 1};
  }
  throw std::invalid_argument("[from_dlpack] Unsupported buffer format '" +
                              fmt + "'.");
}

// A buffer-protocol object's memory (the fallback of producers whose
// __dlpack__ refuses a dtype or a read-only array, as NumPy 1.24 does):
// shared with its strides unless a copy is asked for or needed, as MLX's
// nanobind does.
fx::array from_buffer(py::handle x, std::optional<bool> copy) {
  auto* view = new Py_buffer;
  if (PyObject_GetBuffer(x.ptr(), view, PyBUF_RECORDS_RO) != 0) {
    delete view;
    throw py::error_already_set();
  }
  auto release = [view] {
    PyBuffer_Release(view);
    delete view;
  };
  try {
    std::vector<int64_t> dims(view->shape, view->shape + view->ndim);
    Imported im{static_cast<char*>(view->buf),
                checked_shape(dims.data(), view->ndim, "from_dlpack"),
                {},
                import_type(dl_type_of_format(
                    view->format ? view->format : "B", view->itemsize)),
                view->itemsize,
                release};
    im.strides = fx::row_major_strides(im.shape);
    if (view->strides) {
      std::vector<int64_t> st;
      for (int i = 0; i < view->ndim; ++i) {
        if (view->strides[i] % view->itemsize != 0) {
          throw std::invalid_argument(
              "[from_dlpack] Buffer strides must be multiples of the item "
              "size.");
        }
        st.push_back(view->strides[i] / view->itemsize);
      }
      check_strides(st);
      im.strides = fx::Strides(st.begin(), st.end());
    }
    return adopt_or_copy(std::move(im), copy,
                         std::string("a buffer of format '") +
                             (view->format ? view->format : "B") + "'");
  } catch (...) {
    release();
    throw;
  }
}

// A DLPack capsule from a producer: DLPack 1.0's (max_version), else the
// legacy call. Raises the producer's error (BufferError for dtypes it
// cannot export, say).
py::capsule capsule_of(py::handle x) {
  // A CUDA producer is handed our stream (DLPack's `stream`, the
  // cudaStream_t as an int), on which it makes the tensor's work visible:
  // Fluxion's streams are not ordered after the legacy one a producer
  // assumes without it.
  py::object stream = py::none();
  if (py::hasattr(x, "__dlpack_device__")) {
    auto dev = x.attr("__dlpack_device__")().cast<std::pair<int, int>>();
    if (dev.first == kDLCUDA && dev.second >= 0 &&
        dev.second < fx::device_count(fx::Device::gpu)) {
      void* h = fx::gpu_backend().native_stream(
          fx::default_stream(fx::Device(fx::Device::gpu, dev.second)));
      stream = py::int_(reinterpret_cast<uintptr_t>(h));
    }
  }
  py::object cap;
  try {
    cap = x.attr("__dlpack__")("max_version"_a = py::make_tuple(1, 0),
                               "stream"_a = stream);
  } catch (py::error_already_set& e) {
    // Producers older than DLPack 1.0 take no max_version.
    if (!e.matches(PyExc_TypeError)) {
      throw;
    }
    cap = stream.is_none() ? x.attr("__dlpack__")()
                           : x.attr("__dlpack__")("stream"_a = stream);
  }
  return cap.cast<py::capsule>();
}

}  // namespace

void init_dlpack(py::module_& m, py::class_<fx::array>& cls) {
  cls.def(
         "__dlpack__",
         [](const fx::array& a, py::object stream, py::object max_version,
            py::object dl_device, py::object copy) {
           return to_dlpack(a, max_version, dl_device, copy);
         },
         py::kw_only(), "stream"_a = py::none(), "max_version"_a = py::none(),
         "dl_device"_a = py::none(), "copy"_a = py::none(),
         "A DLPack capsule of the evaluated array (zero-copy unless "
         "copy=True).")
      .def(
          "__dlpack_device__",
          [](const fx::array& a) {
            fxpy::eval_nogil(a);
            auto d = dl_home(a);
            return py::make_tuple(d.first, d.second);
          },
          "The DLPack device where the (evaluated) array's buffer lives: "
          "(1, 0) for the CPU, (2, i) for CUDA GPU i.");
  m.def(
      "from_dlpack",
      [](py::object x, py::object device, std::optional<bool> copy) {
        std::optional<fx::Device> want;
        if (!device.is_none()) {
          want = fxpy::cast_arg<fx::Device>(device, "from_dlpack", "device",
                                            "a Device or None");
        }
        // On another device than the producer's: a copy there (lazy).
        auto place = [&](fx::array a) {
          // A lazy import (a conversion) lives where its kernel runs.
          fx::Device at = a.has_primitive() ? a.primitive().device()
                                            : a.home_device();
          if (!want || at.type == want->type) {
            return a;
          }
          if (copy && !*copy) {
            throw std::invalid_argument(
                "[from_dlpack] copy=False, but the tensor is not on the "
                "device asked for.");
          }
          return fx::copy(a, *want);
        };
        if (PyCapsule_CheckExact(x.ptr())) {
          return place(
              from_capsule(py::reinterpret_borrow<py::capsule>(x), copy));
        }
        if (!py::hasattr(x, "__dlpack__")) {
          throw std::invalid_argument(
              "[from_dlpack] Expected an object with __dlpack__ or a DLPack "
              "capsule; got " +
              py::str(py::type::of(x)).cast<std::string>() + ".");
        }
        py::capsule cap;
        try {
          cap = capsule_of(x);
        } catch (py::error_already_set& e) {
          // A producer that cannot export through DLPack (NumPy before
          // 1.25 refuses bool and read-only arrays) but has a buffer: read
          // through it, as MLX (nanobind) does.
          if (!e.matches(PyExc_BufferError) ||
              !PyObject_CheckBuffer(x.ptr())) {
            throw;
          }
          return place(from_buffer(x, copy));
        }
        return place(from_capsule(cap, copy));
      },
      "x"_a, py::pos_only(), py::kw_only(), "device"_a = py::none(),
      "copy"_a = py::none(),
      R"doc(Make an array from a DLPack producer (NumPy, PyTorch or JAX on the CPU or a CUDA GPU, ...).

``float64`` and ``complex128`` arrive as ``float32`` and ``complex64``, as
in MLX.

Args:
    x (object): An object with ``__dlpack__``, or a DLPack capsule.
    device (Device, optional): Where the array should live; ``None``
        keeps the producer's device (a CUDA tensor's memory is shared
        with the GPU array). Another device makes a copy there.
    copy (bool, optional): ``None`` shares the producer's memory (with its
        strides) when the dtype needs no conversion; ``True`` always
        copies; ``False`` never copies and raises where it would have to.

Returns:
    array: The array.

Example:
    >>> import numpy as np
    >>> mx.from_dlpack(np.arange(3, dtype=np.int32)).tolist()
    [0, 1, 2]
)doc");
}

namespace fxpy {

// mx.array(obj) for a DLPack producer that is not a NumPy array (a PyTorch
// tensor: its bfloat16 has no NumPy form): a copy of its elements; nullopt
// when the producer cannot export (its __array__ is then tried).
std::optional<fx::array> array_from_dlpack(py::handle x) {
  py::capsule cap;
  try {
    cap = capsule_of(x);
  } catch (py::error_already_set&) {
    return std::nullopt;
  }
  try {
    return from_capsule(cap, true);
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

}  // namespace fxpy
