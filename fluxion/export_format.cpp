// The bytes of export_function's files (the layout export.h describes):
// the traces an exporter collected encoded into a file's contents, and a
// file's contents decoded back into traces. Both directions live here, next
// to each other, so that the writer and the reader cannot drift apart;
// export.cpp and import.cpp only move the bytes to and from the file.
// Reading trusts nothing: every count, id, dtype and shape is checked,
// and a bad one raises "[import_function] <what> in '<path>'.".
#include "fluxion/export_format.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <unordered_map>

#include "fluxion/ops/layout.h"

namespace fluxion::detail {

namespace {

constexpr char kMagic[4] = {'F', 'X', 'F', 'N'};
constexpr uint32_t kVersion = 1;

// Appends the file's building blocks: fixed-size values as their bytes,
// strings and shapes after their length, dtypes as their code.
class BinWriter {
 public:
  template <typename T>
  void pod(T v) {
    buf_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    buf_.append(s);
  }
  void bytes(const char* p, size_t n) { buf_.append(p, n); }
  void shape(const Shape& s) {
    pod<uint32_t>(s.size());
    for (auto d : s) {
      pod<int32_t>(d);
    }
  }
  void dtype(Dtype t) { pod<uint8_t>(static_cast<uint8_t>(t.val)); }
  const std::string& data() const { return buf_; }

 private:
  std::string buf_;
};

// Reads them back; a read past the end or an impossible value fails,
// naming the file.
class BinReader {
 public:
  BinReader(std::string data, std::string path)
      : data_(std::move(data)), path_(std::move(path)) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("[import_function] " + what + " in '" + path_ +
                                "'.");
  }
  template <typename T>
  T pod() {
    if (pos_ + sizeof(T) > data_.size()) {
      fail("Truncated file");
    }
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    uint64_t n = pod<uint64_t>();
    if (n > data_.size() - pos_) {
      fail("Truncated file");
    }
    std::string s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  const char* bytes(uint64_t n) {
    if (n > data_.size() - pos_) {
      fail("Truncated file");
    }
    const char* p = data_.data() + pos_;
    pos_ += n;
    return p;
  }
  Shape shape() {
    uint32_t nd = pod<uint32_t>();
    if (nd > 64) {
      fail("Corrupt shape");
    }
    Shape s(nd);
    for (auto& d : s) {
      d = pod<int32_t>();
      if (d < 0) {
        fail("Corrupt shape");
      }
    }
    return s;
  }
  Dtype dtype() {
    static const Dtype all[] = {bool_,   uint8,   uint16,   uint32,   uint64,
                                int8,    int16,   int32,    int64,    float16,
                                float32, float64, bfloat16, complex64};
    uint8_t v = pod<uint8_t>();
    for (auto t : all) {
      if (static_cast<uint8_t>(t.val) == v) {
        return t;
      }
    }
    fail("Corrupt dtype " + std::to_string(v));
  }
  uint32_t count(uint32_t limit) {
    uint32_t n = pod<uint32_t>();
    if (n > limit) {
      fail("Corrupt count");
    }
    return n;
  }

 private:
  std::string data_;
  std::string path_;
  size_t pos_ = 0;
};

// A primitive's parameter: which PrimitiveArg alternative it is, then its
// value.
enum ArgTag : uint8_t { kBool, kInt, kDouble, kString, kDtype, kInts };

void write_arg(BinWriter& w, const PrimitiveArg& a) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          w.pod<uint8_t>(kBool);
          w.pod<uint8_t>(v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          w.pod<uint8_t>(kInt);
          w.pod<int64_t>(v);
        } else if constexpr (std::is_same_v<T, double>) {
          w.pod<uint8_t>(kDouble);
          w.pod<double>(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          w.pod<uint8_t>(kString);
          w.str(v);
        } else if constexpr (std::is_same_v<T, Dtype>) {
          w.pod<uint8_t>(kDtype);
          w.dtype(v);
        } else {
          w.pod<uint8_t>(kInts);
          w.pod<uint64_t>(v.size());
          for (auto x : v) {
            w.pod<int64_t>(x);
          }
        }
      },
      a);
}

PrimitiveArg read_arg(BinReader& r) {
  switch (r.pod<uint8_t>()) {
    case kBool: {
      uint8_t v = r.pod<uint8_t>();
      if (v > 1) {
        r.fail("Corrupt bool parameter " + std::to_string(v));
      }
      return v != 0;
    }
    case kInt:
      return r.pod<int64_t>();
    case kDouble:
      return r.pod<double>();
    case kString:
      return r.str();
    case kDtype:
      return r.dtype();
    case kInts: {
      uint64_t n = r.pod<uint64_t>();
      if (n > (1u << 20)) {
        r.fail("Corrupt parameter list");
      }
      std::vector<int64_t> v(n);
      for (auto& x : v) {
        x = r.pod<int64_t>();
      }
      return v;
    }
    default:
      r.fail("Corrupt parameter tag");
  }
}

}  // namespace

std::string encode_exported_function(const std::string& metadata,
                                     bool shapeless,
                                     const std::vector<ExportedTrace>& traces) {
  BinWriter w;
  w.bytes(kMagic, 4);
  w.pod<uint32_t>(kVersion);
  w.str(metadata);
  w.pod<uint8_t>(shapeless);
  // Constants, once per file.
  std::unordered_map<uintptr_t, uint32_t> const_index;
  std::vector<array> consts;
  for (auto& t : traces) {
    for (auto& v : t.ir.values) {
      if (v.constant && !const_index.count(v.constant->id())) {
        const_index[v.constant->id()] = static_cast<uint32_t>(consts.size());
        consts.push_back(*v.constant);
      }
    }
  }
  w.pod<uint32_t>(consts.size());
  for (auto& c : consts) {
    array x = contiguous(c, false);
    x.eval();
    w.dtype(x.dtype());
    w.shape(x.shape());
    w.pod<uint64_t>(x.nbytes());
    w.bytes(static_cast<const char*>(x.raw_data()), x.nbytes());
  }
  w.pod<uint32_t>(traces.size());
  for (auto& t : traces) {
    w.pod<uint32_t>(t.n_args);
    w.pod<uint32_t>(t.kwarg_names.size());
    for (auto& k : t.kwarg_names) {
      w.str(k);
    }
    for (size_t i = 0; i < t.dtypes.size(); ++i) {
      w.dtype(t.dtypes[i]);
      w.shape(t.shapes[i]);
    }
    const auto& ir = t.ir;
    w.pod<uint32_t>(ir.values.size());
    for (auto& v : ir.values) {
      w.dtype(v.dtype);
      w.shape(v.shape);
      w.pod<int64_t>(v.constant ? int64_t{const_index.at(v.constant->id())}
                                : int64_t{-1});
    }
    w.pod<uint32_t>(ir.inputs.size());
    for (int v : ir.inputs) {
      w.pod<int32_t>(v);
    }
    w.pod<uint32_t>(ir.nodes.size());
    for (auto& n : ir.nodes) {
      auto [name, args] = export_primitive(*n.prim);
      w.str(name);
      w.pod<uint32_t>(args.size());
      for (auto& a : args) {
        write_arg(w, a);
      }
      w.pod<uint32_t>(n.inputs.size());
      for (int v : n.inputs) {
        w.pod<int32_t>(v);
      }
      w.pod<uint32_t>(n.outputs.size());
      for (int v : n.outputs) {
        w.pod<int32_t>(v);
      }
    }
    w.pod<uint32_t>(ir.outputs.size());
    for (int v : ir.outputs) {
      w.pod<int32_t>(v);
    }
  }
  return w.data();
}

ExportedFunctionFile decode_exported_function(std::string bytes,
                                              const std::string& path) {
  ExportedFunctionFile file;
  BinReader r(std::move(bytes), path);
  const char* magic = r.bytes(4);
  if (std::memcmp(magic, kMagic, 4) != 0) {
    r.fail("Not an exported function (bad magic)");
  }
  uint32_t version = r.pod<uint32_t>();
  if (version != kVersion) {
    r.fail("Unsupported version " + std::to_string(version));
  }
  file.metadata = r.str();
  uint8_t shapeless = r.pod<uint8_t>();
  if (shapeless > 1) {
    r.fail("Corrupt shapeless flag " + std::to_string(shapeless));
  }
  file.shapeless = shapeless != 0;
  Stream s = to_stream({});  // the stream the primitives are rebuilt on
  std::vector<array> consts;
  uint32_t n_consts = r.count(1u << 24);
  for (uint32_t i = 0; i < n_consts; ++i) {
    Dtype t = r.dtype();
    Shape shape = r.shape();
    uint64_t nbytes = r.pod<uint64_t>();
    if (nbytes != static_cast<uint64_t>(shape_size(shape)) * t.size) {
      r.fail("Corrupt constant");
    }
    const char* p = r.bytes(nbytes);
    // A bool constant's bytes are read as bool by the kernels: anything but
    // 0 and 1 is undefined behaviour there (UBSan: a bool load of 255).
    if (t == bool_) {
      for (uint64_t k = 0; k < nbytes; ++k) {
        if (static_cast<unsigned char>(p[k]) > 1) {
          r.fail("Corrupt bool constant (byte " +
                 std::to_string(static_cast<unsigned char>(p[k])) + ")");
        }
      }
    }
    void* buf = std::malloc(std::max<uint64_t>(nbytes, 1));
    if (!buf) {
      throw std::bad_alloc();
    }
    std::memcpy(buf, p, nbytes);
    consts.emplace_back(buf, shape, t, [](void* q) { std::free(q); });
  }
  uint32_t n_traces = r.count(1u << 20);
  for (uint32_t ti = 0; ti < n_traces; ++ti) {
    ExportedTrace t;
    t.n_args = static_cast<int>(r.count(1u << 20));
    uint32_t n_kw = r.count(1u << 20);
    for (uint32_t i = 0; i < n_kw; ++i) {
      t.kwarg_names.push_back(r.str());
    }
    for (int i = 0; i < t.n_args + static_cast<int>(n_kw); ++i) {
      t.dtypes.push_back(r.dtype());
      t.shapes.push_back(r.shape());
    }
    uint32_t n_values = r.count(1u << 28);
    auto check_value = [&](int32_t v) {
      if (v < 0 || static_cast<uint32_t>(v) >= n_values) {
        r.fail("Corrupt value id");
      }
      return v;
    };
    for (uint32_t i = 0; i < n_values; ++i) {
      Dtype dtype = r.dtype();
      Shape shape = r.shape();
      int64_t c = r.pod<int64_t>();
      std::optional<array> constant;
      if (c >= 0) {
        if (static_cast<uint64_t>(c) >= consts.size()) {
          r.fail("Corrupt constant index");
        }
        constant = consts[c];
      }
      t.ir.values.push_back({shape, dtype, constant});
    }
    uint32_t n_in = r.count(n_values);
    for (uint32_t i = 0; i < n_in; ++i) {
      t.ir.inputs.push_back(check_value(r.pod<int32_t>()));
    }
    if (n_in != t.dtypes.size()) {
      r.fail("Corrupt signature");
    }
    for (uint32_t i = 0; i < n_in; ++i) {
      if (t.ir.values[t.ir.inputs[i]].dtype != t.dtypes[i]) {
        r.fail("Corrupt signature: input " + std::to_string(i) +
               "'s value has dtype " +
               std::to_string(
                   static_cast<int>(t.ir.values[t.ir.inputs[i]].dtype.val)) +
               ", its signature " +
               std::to_string(static_cast<int>(t.dtypes[i].val)));
      }
    }
    uint32_t n_nodes = r.count(1u << 28);
    for (uint32_t i = 0; i < n_nodes; ++i) {
      std::string name = r.str();
      uint32_t n_args = r.count(1u << 16);
      std::vector<PrimitiveArg> args;
      for (uint32_t k = 0; k < n_args; ++k) {
        args.push_back(read_arg(r));
      }
      IrNode node{import_primitive(name, args, s), {}, {}};
      uint32_t ni = r.count(n_values);
      for (uint32_t k = 0; k < ni; ++k) {
        node.inputs.push_back(check_value(r.pod<int32_t>()));
      }
      uint32_t no = r.count(n_values);
      for (uint32_t k = 0; k < no; ++k) {
        node.outputs.push_back(check_value(r.pod<int32_t>()));
      }
      t.ir.nodes.push_back(std::move(node));
    }
    uint32_t n_out = r.count(n_values);
    for (uint32_t i = 0; i < n_out; ++i) {
      t.ir.outputs.push_back(check_value(r.pod<int32_t>()));
    }
    file.traces.push_back(std::move(t));
  }
  return file;
}

}  // namespace fluxion::detail
