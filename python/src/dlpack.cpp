// DLPack exchange: `array.__dlpack__` (the legacy capsule for consumers
// that ask for no version, DLPack 1.0's versioned one for those passing
// max_version >= (1, 0), as NumPy 2 and recent PyTorch do),
// `__dlpack_device__`, and `mx.from_dlpack` for any producer.
// The ABI structs are declared here: no DLPack header ships with Debian.
#include <cstring>

#include "python/src/convert.h"

namespace {

constexpr int32_t kDLCPU = 1;
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

void check_device(py::object dl_device) {
  if (dl_device.is_none()) {
    return;
  }
  auto dev = dl_device.cast<std::pair<int, int>>();
  if (dev.first != kDLCPU) {
    throw py::buffer_error("[__dlpack__] Cannot export to DLPack device (" +
                           std::to_string(dev.first) + ", " +
                           std::to_string(dev.second) +
                           "): the array lives on the CPU (1, 0).");
  }
}

py::capsule to_dlpack(const fx::array& in, py::object max_version,
                      py::object dl_device, py::object copy) {
  check_device(dl_device);
  bool copied = !copy.is_none() && copy.cast<bool>();
  fx::array a = copied ? fx::copy(in) : in;
  fxpy::eval_nogil(a);
  bool versioned = false;
  if (!max_version.is_none()) {
    versioned = max_version.cast<std::pair<int, int>>().first >= 1;
  }
  auto* hold = new DLHold{a, {}, {}, {}, {}};
  for (int i = 0; i < a.ndim(); ++i) {
    hold->shape.push_back(a.shape(i));
    hold->strides.push_back(a.strides()[i]);
  }
  DLTensor t;
  t.data = hold->a.raw_data();
  t.device = {kDLCPU, 0};
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

// The producer's tensor, consumed: its deleter runs when the last Fluxion
// array using the memory is gone.
fx::array from_capsule(py::capsule cap) {
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
  if (t->device.device_type != kDLCPU &&
      t->device.device_type != kDLCUDAHost) {
    throw std::invalid_argument(
        "[from_dlpack] Only CPU tensors can be imported; got DLPack device "
        "type " +
        std::to_string(t->device.device_type) + ".");
  }
  fx::Dtype dtype = dtype_from_dl(t->dtype);
  fx::Shape shape;
  int64_t size = 1;
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] < 0 || t->shape[i] > INT32_MAX) {
      throw std::invalid_argument("[from_dlpack] Dimension " +
                                  std::to_string(t->shape[i]) +
                                  " does not fit in int32.");
    }
    shape.push_back(static_cast<int32_t>(t->shape[i]));
    size *= t->shape[i];
  }
  // Row-contiguous tensors (strides null, or equal to the row-major ones
  // wherever the dimension is longer than 1) are used in place.
  bool contiguous = true;
  if (t->strides) {
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; --i) {
      if (t->shape[i] > 1 && t->strides[i] != expect) {
        contiguous = false;
      }
      expect *= t->shape[i];
    }
  }
  char* data = static_cast<char*>(t->data) + t->byte_offset;
  // The capsule is consumed from here on: the deleter is ours to call.
  PyCapsule_SetName(cap.ptr(), versioned ? "used_dltensor_versioned"
                                         : "used_dltensor");
  auto owner = std::make_shared<std::function<void()>>(std::move(release));
  auto deleter = [owner](void*) {
    // The producer's deleter may touch Python objects.
    py::gil_scoped_acquire gil;
    (*owner)();
  };
  if (contiguous || size == 0) {
    return fx::array(data, shape, dtype, deleter);
  }
  // Strided: copy the elements into a fresh row-major buffer.
  int64_t item = dtype.size;
  size_t nbytes = static_cast<size_t>(size * item);
  char* dst = static_cast<char*>(fx::allocator::malloc(nbytes));
  fx::array out(dst, shape, dtype,
                [nbytes](void* q) { fx::allocator::free(q, nbytes); });
  std::vector<int64_t> idx(t->ndim, 0);
  for (int64_t n = 0; n < size; ++n) {
    int64_t off = 0;
    for (int i = 0; i < t->ndim; ++i) {
      off += idx[i] * t->strides[i];
    }
    std::memcpy(dst + n * item, data + off * item, item);
    for (int i = t->ndim - 1; i >= 0; --i) {
      if (++idx[i] < t->shape[i]) {
        break;
      }
      idx[i] = 0;
    }
  }
  deleter(nullptr);
  return out;
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
          [](const fx::array&) { return py::make_tuple(kDLCPU, 0); },
          "The DLPack device: (1, 0), the CPU.");
  m.def(
      "from_dlpack",
      [](py::object x) {
        if (PyCapsule_CheckExact(x.ptr())) {
          return from_capsule(py::reinterpret_borrow<py::capsule>(x));
        }
        if (!py::hasattr(x, "__dlpack__")) {
          throw std::invalid_argument(
              "[from_dlpack] Expected an object with __dlpack__ or a DLPack "
              "capsule; got " +
              py::str(py::type::of(x)).cast<std::string>() + ".");
        }
        py::object cap;
        try {
          cap = x.attr("__dlpack__")("max_version"_a = py::make_tuple(1, 0));
        } catch (py::error_already_set& e) {
          // Producers older than DLPack 1.0 take no max_version.
          if (!e.matches(PyExc_TypeError)) {
            throw;
          }
          cap = x.attr("__dlpack__")();
        }
        return from_capsule(cap.cast<py::capsule>());
      },
      "x"_a,
      "An array sharing the memory of a DLPack producer (a NumPy array, a "
      "PyTorch CPU tensor...).");
}
