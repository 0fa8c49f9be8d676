// Array files: mx.save / mx.load / mx.savez / mx.savez_compressed /
// mx.save_safetensors. `file` is a str, an os.PathLike (pathlib.Path) or a
// binary file-like object (with write() to save, read() to load; loading
// from one reads all its bytes into memory, the arrays stay lazy).
#include "fluxion/ops/io.h"

#include "python/src/convert.h"

namespace {

using ArrayMap = std::unordered_map<std::string, fx::array>;

std::optional<std::string> as_path(py::handle f) {
  if (py::isinstance<py::str>(f)) {
    return f.cast<std::string>();
  }
  if (py::hasattr(f, "__fspath__")) {
    py::object p = py::module_::import("os").attr("fspath")(f);
    if (py::isinstance<py::str>(p)) {
      return p.cast<std::string>();
    }
  }
  return std::nullopt;
}

std::string type_name(py::handle h) {
  return py::str(py::type::of(h).attr("__name__")).cast<std::string>();
}

[[noreturn]] void bad_file(const char* op, py::handle f, const char* need) {
  throw py::type_error(std::string("[") + op +
                       "] file must be a str, a pathlib.Path or a binary "
                       "file-like object with " +
                       need + "(); got " + type_name(f) + ".");
}

// Saves through `write` to a path, or into memory and then file.write().
template <typename PathFn, typename WriterFn>
void save_to(const char* op, py::handle file, PathFn to_path,
             WriterFn to_writer) {
  if (auto path = as_path(file)) {
    py::gil_scoped_release nogil;
    to_path(*path);
    return;
  }
  if (!py::hasattr(file, "write")) {
    bad_file(op, file, "write");
  }
  auto w = std::make_shared<fx::io::MemoryWriter>();
  {
    py::gil_scoped_release nogil;
    to_writer(w);
  }
  file.attr("write")(py::bytes(w->bytes()));
}

ArrayMap to_map(const py::dict& d, const char* op) {
  ArrayMap out;
  for (auto [k, v] : d) {
    if (!py::isinstance<py::str>(k)) {
      throw py::type_error(std::string("[") + op +
                           "] array names must be str; got " + type_name(k) +
                           ".");
    }
    fx::array a = fxpy::to_array(v);
    fxpy::eval_nogil(a);
    out.insert_or_assign(k.cast<std::string>(), a);
  }
  return out;
}

// savez's names: positional arrays become arr_0, arr_1, ...
ArrayMap savez_map(const py::args& args, const py::kwargs& kwargs,
                   const char* op) {
  py::dict d;
  for (size_t i = 0; i < args.size(); ++i) {
    d[py::str("arr_" + std::to_string(i))] = args[i];
  }
  for (auto [k, v] : kwargs) {
    if (d.contains(k)) {
      throw std::invalid_argument(std::string("[") + op +
                                  "] Cannot use un-named variables and the "
                                  "keyword " +
                                  py::str(k).cast<std::string>() + ".");
    }
    d[k] = v;
  }
  return to_map(d, op);
}

// Names and strings read from a file as Python str: bytes that are not
// UTF-8 (a zip member name, GGUF metadata) become \x escapes rather than a
// UnicodeDecodeError naming no op (found by the loader fuzzer).
py::str file_str(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(
      s.data(), static_cast<Py_ssize_t>(s.size()), "backslashreplace");
  if (o == nullptr) {
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::str>(o);
}

py::dict to_dict(const ArrayMap& m) {
  std::vector<std::string> keys;
  for (auto& [k, v] : m) {
    keys.push_back(k);
  }
  std::sort(keys.begin(), keys.end());
  py::dict d;
  for (auto& k : keys) {
    d[file_str(k)] = m.at(k);
  }
  return d;
}

py::object load(py::handle file, std::optional<std::string> format,
                bool return_metadata, fx::StreamOrDevice s) {
  std::shared_ptr<fx::io::Reader> reader;
  std::string name;
  if (auto path = as_path(file)) {
    name = *path;
  } else if (py::hasattr(file, "read")) {
    if (py::hasattr(file, "name") &&
        py::isinstance<py::str>(file.attr("name"))) {
      name = file.attr("name").cast<std::string>();
    }
  } else {
    bad_file("load", file, "read");
  }
  if (!format) {
    auto dot = name.rfind('.');
    auto slash = name.rfind('/');
    if (dot == std::string::npos ||
        (slash != std::string::npos && dot < slash)) {
      throw std::invalid_argument(
          "[load] Could not infer the format of '" +
          (name.empty() ? std::string("<file object>") : name) +
          "' from its extension; pass format='npy', 'npz' or "
          "'safetensors'.");
    }
    format = name.substr(dot + 1);
  }
  if (*format != "npy" && *format != "npz" && *format != "safetensors" &&
      *format != "gguf") {
    throw std::invalid_argument("[load] Unsupported file format '" + *format +
                                "' (supported: npy, npz, safetensors, gguf).");
  }
  if (return_metadata && *format != "safetensors" && *format != "gguf") {
    throw std::invalid_argument(
        "[load] Metadata is not supported for format '" + *format +
        "' (only safetensors and gguf have it).");
  }
  if (auto path = as_path(file)) {
    reader = std::make_shared<fx::io::FileReader>(*path);
  } else {
    py::object got = file.attr("read")();
    if (!py::isinstance<py::bytes>(got)) {
      throw py::type_error(
          "[load] The file object must be opened in binary mode (its read() "
          "returned " +
          type_name(got) + ", not bytes).");
    }
    py::bytes data = got;
    reader = std::make_shared<fx::io::MemoryReader>(
        data.cast<std::string>(), name.empty() ? "<file object>" : name);
  }
  if (*format == "npy") {
    return py::cast(fx::load(reader, s));
  }
  if (*format == "npz") {
    return to_dict(fx::load_npz(reader, s));
  }
  if (*format == "gguf") {
    auto [arrays, metadata] = fx::load_gguf(reader, s);
    if (!return_metadata) {
      return to_dict(arrays);
    }
    py::dict meta;
    for (auto& [k, v] : metadata) {
      if (auto* a = std::get_if<fx::array>(&v)) {
        meta[file_str(k)] = py::cast(*a);
      } else if (auto* str = std::get_if<std::string>(&v)) {
        meta[file_str(k)] = file_str(*str);
      } else if (auto* l = std::get_if<std::vector<std::string>>(&v)) {
        py::list items;
        for (auto& e : *l) {
          items.append(file_str(e));
        }
        meta[file_str(k)] = items;
      } else {
        meta[file_str(k)] = py::none();
      }
    }
    return py::make_tuple(to_dict(arrays), meta);
  }
  auto [arrays, metadata] = fx::load_safetensors(reader, s);
  if (!return_metadata) {
    return to_dict(arrays);
  }
  py::dict meta;
  for (auto& [k, v] : metadata) {
    meta[file_str(k)] = file_str(v);
  }
  return py::make_tuple(to_dict(arrays), meta);
}

// GGUF metadata from Python: str, a list of str, or an array (anything
// array-like: 0-d or 1-D).
std::unordered_map<std::string, fx::GGUFMetaData> gguf_metadata(
    const py::dict& d) {
  std::unordered_map<std::string, fx::GGUFMetaData> out;
  for (auto [k, v] : d) {
    if (!py::isinstance<py::str>(k)) {
      throw py::type_error("[save_gguf] Metadata keys must be str; got " +
                           type_name(k) + ".");
    }
    std::string key = k.cast<std::string>();
    if (py::isinstance<py::str>(v)) {
      out[key] = v.cast<std::string>();
    } else if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
      bool strings = py::len(v) > 0;
      for (auto e : v) {
        strings = strings && py::isinstance<py::str>(e);
      }
      if (strings) {
        out[key] = v.cast<std::vector<std::string>>();
      } else {
        fx::array a = fxpy::to_array(v);
        fxpy::eval_nogil(a);
        out[key] = a;
      }
    } else {
      fx::array a = fxpy::to_array(v);
      fxpy::eval_nogil(a);
      out[key] = a;
    }
  }
  return out;
}

}  // namespace

void init_export(py::module_& m);  // export.cpp

void init_io(py::module_& m) {
  init_export(m);
  m.def(
      "save",
      [](py::handle file, py::handle arr) {
        fx::array a = fxpy::to_array(arr);
        fxpy::eval_nogil(a);
        save_to(
            "save", file, [&](const std::string& p) { fx::save(p, a); },
            [&](auto w) { fx::save(w, a); });
      },
      "file"_a, "arr"_a,
      R"doc(Save an array to a ``.npy`` file.

Args:
    file (str, pathlib.Path or file object): Where to write. ``".npy"`` is appended to a path without it.
    arr (array or array-like): The array.

Example:
    >>> mx.save("weights", mx.ones((2, 2)))   # writes weights.npy
)doc");
  m.def("load", &load, "file"_a, py::pos_only(), "format"_a = py::none(),
        "return_metadata"_a = false, py::kw_only(), "stream"_a = py::none(),
      R"doc(Load arrays from a ``.npy``, ``.npz``, ``.safetensors`` or ``.gguf`` file.

Loading is lazy: the data is read when the arrays are evaluated.

Args:
    file (str, pathlib.Path or file object): The file.
    format (str, optional): ``"npy"``, ``"npz"``, ``"safetensors"`` or
        ``"gguf"``; from the extension when omitted.
    return_metadata (bool, optional): Also return the metadata of a
        safetensors or GGUF file. Default ``False``.
    stream (Stream or Device, optional): Where the reads run.

Returns:
    array or dict(str, array): An array for ``.npy``, else a dict of
    arrays; ``(arrays, metadata)`` with ``return_metadata``.

Example:
    >>> mx.savez("ckpt", w=mx.ones((2,)))
    >>> mx.load("ckpt.npz")["w"].tolist()
    [1.0, 1.0]
)doc");
#define FLUXION_SAVEZ(NAME, SUMMARY)                                        \
  m.def(                                                                    \
      #NAME,                                                                \
      [](py::handle file, py::args args, py::kwargs kwargs) {               \
        ArrayMap arrays = savez_map(args, kwargs, #NAME);                   \
        save_to(                                                            \
            #NAME, file,                                                    \
            [&](const std::string& path) { fx::NAME(path, arrays); },       \
            [&](auto w) { fx::NAME(w, arrays); });                          \
      },                                                                    \
      "file"_a,                                                             \
      SUMMARY "\n\nArgs:\n"                                                 \
      "    file (str, pathlib.Path or file object): Where to write;\n"     \
      "        ``\".npz\"`` is appended to a path without it.\n"            \
      "    *args (array): Arrays saved as ``arr_0``, ``arr_1``, ...\n"      \
      "    **kwargs (array): Arrays saved under their keyword.\n");
  FLUXION_SAVEZ(savez, "Save several arrays to an uncompressed ``.npz`` archive.")
  FLUXION_SAVEZ(savez_compressed,
                "Save several arrays to a compressed ``.npz`` archive.")
#undef FLUXION_SAVEZ
  m.def(
      "save_safetensors",
      [](py::handle file, py::dict arrays, std::optional<py::dict> metadata) {
        ArrayMap a = to_map(arrays, "save_safetensors");
        std::unordered_map<std::string, std::string> meta;
        if (metadata) {
          for (auto [k, v] : *metadata) {
            if (!py::isinstance<py::str>(k) || !py::isinstance<py::str>(v)) {
              throw std::invalid_argument(
                  "[save_safetensors] Metadata keys and values must be str; "
                  "got " +
                  type_name(k) + ": " + type_name(v) + ".");
            }
            meta[k.cast<std::string>()] = v.cast<std::string>();
          }
        }
        save_to(
            "save_safetensors", file,
            [&](const std::string& p) { fx::save_safetensors(p, a, meta); },
            [&](auto w) { fx::save_safetensors(w, a, meta); });
      },
      "file"_a, "arrays"_a, "metadata"_a = py::none(),
      R"doc(Save a dict of arrays in the safetensors format.

Args:
    file (str, pathlib.Path or file object): Where to write. ``".safetensors"`` is appended to a path without it.
    arrays (dict(str, array)): The arrays by name.
    metadata (dict(str, str), optional): String metadata.
)doc");
  m.def(
      "save_gguf",
      [](py::handle file, py::dict arrays, std::optional<py::dict> metadata) {
        ArrayMap a = to_map(arrays, "save_gguf");
        std::unordered_map<std::string, fx::GGUFMetaData> meta;
        if (metadata) {
          meta = gguf_metadata(*metadata);
        }
        save_to(
            "save_gguf", file,
            [&](const std::string& p) { fx::save_gguf(p, a, meta); },
            [&](auto w) { fx::save_gguf(w, a, meta); });
      },
      "file"_a, "arrays"_a, "metadata"_a = py::none(),
      R"doc(Save a dict of arrays in the GGUF format.

Args:
    file (str, pathlib.Path or file object): Where to write. ``".gguf"`` is appended to a path without it.
    arrays (dict(str, array)): The arrays by name.
    metadata (dict, optional): Metadata values: str, list of str, or 0-d
        and 1-D arrays.
)doc");
}
