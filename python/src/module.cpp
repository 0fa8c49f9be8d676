// The extension module fluxion.core.
#include <cstring>

#include "python/src/convert.h"

namespace {
// Messages may quote bytes of a hostile file (a safetensors header, a zip
// member name) that are not UTF-8: PyErr_SetString would then fail to build
// the message and raise the exception with no text at all. Undecodable
// bytes are shown as \x escapes instead.
void set_error(PyObject* type, const char* what) {
  PyObject* msg = PyUnicode_DecodeUTF8(
      what, static_cast<Py_ssize_t>(std::strlen(what)), "backslashreplace");
  if (msg == nullptr) {
    PyErr_Clear();
    PyErr_SetString(type, "(an error message that cannot be decoded)");
    return;
  }
  PyErr_SetObject(type, msg);
  Py_DECREF(msg);
}
}  // namespace

PYBIND11_MODULE(core, m) {
  m.doc() = "Fluxion: lazy arrays with MLX's API.";
  // Fluxion reports bad arguments as std::invalid_argument, bad indices as
  // std::out_of_range and dimensions past int32 as std::overflow_error;
  // messages keep the "[op]" tag.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) {
        std::rethrow_exception(p);
      }
    } catch (const py::error_already_set&) {
      throw;
    } catch (const py::builtin_exception&) {
      throw;
    } catch (const std::invalid_argument& e) {
      set_error(PyExc_ValueError, e.what());
    } catch (const std::out_of_range& e) {
      set_error(PyExc_IndexError, e.what());
    } catch (const std::overflow_error& e) {
      // A computed dimension outside int32 (MLX's OverflowError).
      set_error(PyExc_OverflowError, e.what());
    } catch (const std::bad_alloc& e) {
      set_error(PyExc_MemoryError, e.what());
    } catch (const std::exception& e) {
      set_error(PyExc_RuntimeError, e.what());
    }
  });
  init_dtypes(m);
  init_devices(m);
  init_memory(m);
  init_array(m);
  init_array_methods(m);
  init_array_fast_methods();  // after the methods it replaces
  init_indexing(m);
  init_ops_elementwise(m);
  init_ops_reduce(m);
  init_ops_shape(m);
  init_ops_creation(m);
  init_ops_indexing(m);
  init_ops_linalg(m);
  init_ops_custom(m);
  init_ops_array(m);
  init_ops_sort(m);
  init_ops_conv(m);
  init_linalg(m);
  init_fast(m);
  init_fft(m);
  init_random(m);
  init_transforms(m);
  init_compile(m);
  init_io(m);
  init_quantized(m);
  init_distributed(m);
  init_ops_compat(m);
  init_ops_hadamard(m);
  init_ops_layout(m);
  init_graph_utils(m);
  m.attr("__version__") = FLUXION_VERSION;  // CMakeLists.txt, project()
}
