// The GGUF format (version 3, as llama.cpp writes it): "GGUF", version,
// tensor count, metadata count; typed key/value pairs; tensor infos (name,
// dims innermost first, ggml type, offset); padding to the alignment; the
// tensors' data, each at an aligned offset.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <limits>
#include <map>
#include <stdexcept>

#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/io.h"
#include "fluxion/ops/io_impl.h"
#include "fluxion/ops/shape.h"

namespace fluxion {

namespace {

// Metadata value types.
enum GGUFType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// ggml tensor types used here.
enum GGMLType : uint32_t {
  kTF32 = 0,
  kTF16 = 1,
  kTQ4_0 = 2,
  kTQ4_1 = 3,
  kTQ8_0 = 8,
  kTI8 = 24,
  kTI16 = 25,
  kTI32 = 26,
  kTI64 = 27,
  kTF64 = 28,
  kTBF16 = 30,
};

constexpr uint64_t kDefaultAlignment = 32;

const std::pair<uint32_t, Dtype> kMetaTypes[] = {
    {kU8, uint8},   {kI8, int8},   {kU16, uint16}, {kI16, int16},
    {kU32, uint32}, {kI32, int32}, {kF32, float32}, {kBool, bool_},
    {kU64, uint64}, {kI64, int64}, {kF64, float64}};

const std::pair<uint32_t, Dtype> kTensorTypes[] = {
    {kTF32, float32}, {kTF16, float16}, {kTBF16, bfloat16}, {kTF64, float64},
    {kTI8, int8},     {kTI16, int16},   {kTI32, int32},     {kTI64, int64}};

const char* ggml_name(uint32_t t) {
  static const std::map<uint32_t, const char*> names = {
      {0, "F32"},   {1, "F16"},   {2, "Q4_0"},  {3, "Q4_1"},  {6, "Q5_0"},
      {7, "Q5_1"},  {8, "Q8_0"},  {9, "Q8_1"},  {10, "Q2_K"}, {11, "Q3_K"},
      {12, "Q4_K"}, {13, "Q5_K"}, {14, "Q6_K"}, {15, "Q8_K"}, {24, "I8"},
      {25, "I16"},  {26, "I32"},  {27, "I64"},  {28, "F64"},  {30, "BF16"}};
  auto it = names.find(t);
  return it == names.end() ? "unknown" : it->second;
}

// --- writing ---

class Out {
 public:
  explicit Out(io::Writer& w) : w_(w) {}
  template <typename T>
  void pod(T v) {
    w_.write(reinterpret_cast<const char*>(&v), sizeof(T));
    n_ += sizeof(T);
  }
  void bytes(const char* p, size_t n) {
    w_.write(p, n);
    n_ += n;
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad_to(uint64_t align) {
    static const char zeros[64] = {};
    uint64_t pad = (align - n_ % align) % align;
    bytes(zeros, pad);
  }
  uint64_t written() const { return n_; }

 private:
  io::Writer& w_;
  uint64_t n_ = 0;
};

uint32_t meta_type(Dtype t, const std::string& key) {
  for (auto& [code, d] : kMetaTypes) {
    if (d == t) {
      return code;
    }
  }
  throw std::invalid_argument(
      "[save_gguf] Metadata '" + key + "' has dtype " + dtype_name(t) +
      ", which GGUF cannot store (supported: bool, (u)int8..64, float32, "
      "float64).");
}

void write_meta(Out& o, const std::string& key, const GGUFMetaData& v) {
  o.str(key);
  if (auto* s = std::get_if<std::string>(&v)) {
    o.pod<uint32_t>(kString);
    o.str(*s);
  } else if (auto* l = std::get_if<std::vector<std::string>>(&v)) {
    o.pod<uint32_t>(kArray);
    o.pod<uint32_t>(kString);
    o.pod<uint64_t>(l->size());
    for (auto& s : *l) {
      o.str(s);
    }
  } else if (auto* a = std::get_if<array>(&v)) {
    array x = *a;
    if (x.ndim() > 1) {
      throw std::invalid_argument(
          "[save_gguf] Array metadata must be 0-d or 1-D; '" + key +
          "' has shape " + shape_str(x.shape()) + ".");
    }
    uint32_t t = meta_type(x.dtype(), key);
    std::string tmp;
    const char* data = io_detail::row_major_bytes(x, tmp);
    if (x.ndim() == 0) {
      o.pod<uint32_t>(t);
    } else {
      o.pod<uint32_t>(kArray);
      o.pod<uint32_t>(t);
      o.pod<uint64_t>(x.size());
    }
    o.bytes(data, x.nbytes());
  } else {
    throw std::invalid_argument("[save_gguf] Metadata '" + key +
                                "' has no value.");
  }
}

uint32_t tensor_type(Dtype t, const std::string& key) {
  for (auto& [code, d] : kTensorTypes) {
    if (d == t) {
      return code;
    }
  }
  throw std::invalid_argument(
      "[save_gguf] Array '" + key + "' has dtype " + dtype_name(t) +
      ", which GGUF cannot store (supported: float32, float16, bfloat16, "
      "float64, int8, int16, int32, int64).");
}

void write_gguf(io::Writer& w, const std::unordered_map<std::string, array>& arrays,
                const std::unordered_map<std::string, GGUFMetaData>& metadata) {
  std::map<std::string, array> sorted(arrays.begin(), arrays.end());
  std::map<std::string, GGUFMetaData> meta(metadata.begin(), metadata.end());
  // Validate everything before writing a byte.
  std::vector<uint32_t> types;
  for (auto& [k, a] : sorted) {
    types.push_back(tensor_type(a.dtype(), k));
  }
  Out o(w);
  o.bytes("GGUF", 4);
  o.pod<uint32_t>(3);
  o.pod<uint64_t>(sorted.size());
  o.pod<uint64_t>(meta.size());
  for (auto& [k, v] : meta) {
    write_meta(o, k, v);
  }
  uint64_t offset = 0;
  size_t i = 0;
  for (auto& [k, a] : sorted) {
    o.str(k);
    // GGML lists dims innermost first; a 0-d array is stored as [1].
    o.pod<uint32_t>(std::max(a.ndim(), 1));
    if (a.ndim() == 0) {
      o.pod<uint64_t>(1);
    }
    for (int d = a.ndim() - 1; d >= 0; --d) {
      o.pod<uint64_t>(a.shape(d));
    }
    o.pod<uint32_t>(types[i++]);
    o.pod<uint64_t>(offset);
    offset += (a.nbytes() + kDefaultAlignment - 1) / kDefaultAlignment *
              kDefaultAlignment;
  }
  o.pad_to(kDefaultAlignment);
  for (auto& [k, a] : sorted) {
    array x = a;
    std::string tmp;
    const char* data = io_detail::row_major_bytes(x, tmp);
    o.bytes(data, x.nbytes());
    o.pad_to(kDefaultAlignment);
  }
}

// --- reading ---

class In {
 public:
  explicit In(io::Reader& r) : r_(r) {}
  template <typename T>
  T pod(const char* what) {
    T v;
    io_detail::read_exact(r_, reinterpret_cast<char*>(&v), sizeof(T), pos_,
                          what);
    pos_ += sizeof(T);
    return v;
  }
  std::string bytes(uint64_t n, const char* what) {
    if (n > r_.size() - std::min(pos_, r_.size())) {
      io_detail::load_error(r_, std::string("Truncated GGUF ") + what);
    }
    std::string s(n, '\0');
    io_detail::read_exact(r_, s.data(), n, pos_, what);
    pos_ += n;
    return s;
  }
  std::string str(const char* what) {
    return bytes(pod<uint64_t>(what), what);
  }
  uint64_t pos() const { return pos_; }
  io::Reader& reader() { return r_; }

 private:
  io::Reader& r_;
  uint64_t pos_ = 0;
};

// An array owning a copy of `n` bytes of host data.
array from_bytes(const char* src, Shape shape, Dtype dtype) {
  size_t n = static_cast<size_t>(shape_size(shape)) * dtype.size;
  void* p = std::malloc(std::max<size_t>(n, 1));
  if (!p) {
    throw std::bad_alloc();
  }
  std::memcpy(p, src, n);
  return array(p, std::move(shape), dtype, [](void* q) { std::free(q); });
}

Dtype meta_dtype(In& in, uint32_t t) {
  for (auto& [code, d] : kMetaTypes) {
    if (code == t) {
      return d;
    }
  }
  io_detail::load_error(in.reader(),
                        "Unknown GGUF metadata type " + std::to_string(t));
}

GGUFMetaData read_meta(In& in, const std::string& key) {
  uint32_t t = in.pod<uint32_t>("metadata type");
  if (t == kString) {
    return in.str("metadata string");
  }
  if (t == kArray) {
    uint32_t et = in.pod<uint32_t>("metadata array type");
    uint64_t n = in.pod<uint64_t>("metadata array length");
    if (et == kString) {
      std::vector<std::string> out;
      for (uint64_t i = 0; i < n; ++i) {
        out.push_back(in.str("metadata string"));
      }
      return out;
    }
    if (et == kArray) {
      io_detail::load_error(in.reader(), "Nested GGUF metadata arrays ('" +
                                             key + "') are not supported");
    }
    Dtype d = meta_dtype(in, et);
    if (n > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
      io_detail::load_error(in.reader(), "GGUF metadata array too long");
    }
    std::string raw = in.bytes(n * d.size, "metadata array");
    return from_bytes(raw.data(), Shape{static_cast<int32_t>(n)}, d);
  }
  Dtype d = meta_dtype(in, t);
  std::string raw = in.bytes(d.size, "metadata value");
  return from_bytes(raw.data(), Shape{}, d);
}

float half_to_float(uint16_t h) { return static_cast<float>(float16_t::from_bits(h)); }

// Q4_0 / Q4_1 / Q8_0 blocks of 32 values (rows x cols, cols % 32 == 0) as
// the affine triplet: packed values in Fluxion's order (value i in bits
// [i * bits, ...) of the row), float16 scales and biases per block.
std::vector<array> dequant_blocks(const std::string& raw, uint32_t type,
                                  int rows, int cols) {
  int bits = type == kTQ8_0 ? 8 : 4;
  int blocks_per_row = cols / 32;
  size_t block_bytes = type == kTQ4_0 ? 18 : type == kTQ4_1 ? 20 : 34;
  int64_t nblocks = int64_t{rows} * blocks_per_row;
  Shape wshape{rows, cols * bits / 32};
  Shape sshape{rows, blocks_per_row};
  std::vector<uint32_t> wv(static_cast<size_t>(rows) * wshape[1]);
  std::vector<float16_t> sv(nblocks), bv(nblocks);
  auto* wp = reinterpret_cast<uint8_t*>(wv.data());
  auto* sp = sv.data();
  auto* bp = bv.data();
  const auto* src = reinterpret_cast<const uint8_t*>(raw.data());
  for (int64_t b = 0; b < nblocks; ++b) {
    const uint8_t* blk = src + b * block_bytes;
    uint16_t dbits, mbits = 0;
    std::memcpy(&dbits, blk, 2);
    float d = half_to_float(dbits);
    uint8_t q[32];
    const uint8_t* qs;
    if (type == kTQ8_0) {
      qs = blk + 2;
      for (int j = 0; j < 32; ++j) {
        q[j] = static_cast<uint8_t>(static_cast<int8_t>(qs[j]) + 128);
      }
      sp[b] = float16_t(d);
      bp[b] = float16_t(-128.0f * d);
    } else {
      if (type == kTQ4_1) {
        std::memcpy(&mbits, blk + 2, 2);
        qs = blk + 4;
      } else {
        qs = blk + 2;
      }
      // GGML's nibble order: byte j holds values j (low) and j + 16 (high).
      for (int j = 0; j < 16; ++j) {
        q[j] = qs[j] & 15;
        q[j + 16] = qs[j] >> 4;
      }
      sp[b] = float16_t(d);
      bp[b] = type == kTQ4_1 ? float16_t::from_bits(mbits)
                             : float16_t(-8.0f * d);
    }
    uint8_t* dst = wp + b * (32 * bits / 8);
    if (bits == 8) {
      std::memcpy(dst, q, 32);
    } else {
      for (int j = 0; j < 16; ++j) {
        dst[j] = static_cast<uint8_t>(q[2 * j] | (q[2 * j + 1] << 4));
      }
    }
  }
  return {from_bytes(reinterpret_cast<const char*>(wv.data()), wshape, uint32),
          from_bytes(reinterpret_cast<const char*>(sv.data()), sshape, float16),
          from_bytes(reinterpret_cast<const char*>(bv.data()), sshape,
                     float16)};
}

}  // namespace

void save_gguf(std::shared_ptr<io::Writer> out,
               const std::unordered_map<std::string, array>& arrays,
               const std::unordered_map<std::string, GGUFMetaData>& metadata) {
  write_gguf(*out, arrays, metadata);
}

void save_gguf(std::string file,
               const std::unordered_map<std::string, array>& arrays,
               const std::unordered_map<std::string, GGUFMetaData>& metadata) {
  // Validate first, so a failing save leaves no file behind.
  for (auto& [k, a] : arrays) {
    tensor_type(a.dtype(), k);
  }
  for (auto& [k, v] : metadata) {
    if (auto* a = std::get_if<array>(&v)) {
      meta_type(a->dtype(), k);
    }
  }
  io::FileWriter w(io_detail::with_extension(std::move(file), ".gguf"),
                   "save_gguf");
  write_gguf(w, arrays, metadata);
}

GGUFLoad load_gguf(std::shared_ptr<io::Reader> reader, StreamOrDevice s) {
  using io_detail::load_error;
  Stream stream = io_detail::load_stream(s);
  In in(*reader);
  std::string magic = in.bytes(4, "magic");
  if (magic != "GGUF") {
    load_error(*reader, "Not a GGUF file (bad magic)");
  }
  uint32_t version = in.pod<uint32_t>("version");
  if (version != 2 && version != 3) {
    load_error(*reader, "Unsupported GGUF version " + std::to_string(version));
  }
  uint64_t n_tensors = in.pod<uint64_t>("tensor count");
  uint64_t n_meta = in.pod<uint64_t>("metadata count");
  GGUFLoad result;
  uint64_t alignment = kDefaultAlignment;
  for (uint64_t i = 0; i < n_meta; ++i) {
    std::string key = in.str("metadata key");
    auto v = read_meta(in, key);
    if (key == "general.alignment") {
      if (auto* a = std::get_if<array>(&v); a && a->size() == 1 &&
                                            a->dtype() == uint32) {
        alignment = a->data<uint32_t>()[0];
      }
      if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
        load_error(*reader, "Invalid general.alignment " +
                                std::to_string(alignment));
      }
    }
    result.second.insert_or_assign(key, std::move(v));
  }
  struct Info {
    std::string name;
    Shape shape;
    uint32_t type;
    uint64_t offset;
  };
  std::vector<Info> infos;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    Info t;
    t.name = in.str("tensor name");
    uint32_t nd = in.pod<uint32_t>("tensor dims");
    if (nd > 8) {
      load_error(*reader, "Tensor '" + t.name + "' has " + std::to_string(nd) +
                              " dimensions");
    }
    std::vector<uint64_t> dims(nd);
    for (auto& d : dims) {
      d = in.pod<uint64_t>("tensor dim");
      if (d > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
        load_error(*reader, "Tensor '" + t.name + "' is too large");
      }
    }
    for (int d = static_cast<int>(nd) - 1; d >= 0; --d) {
      t.shape.push_back(static_cast<int32_t>(dims[d]));
    }
    t.type = in.pod<uint32_t>("tensor type");
    t.offset = in.pod<uint64_t>("tensor offset");
    infos.push_back(std::move(t));
  }
  uint64_t data_start = (in.pos() + alignment - 1) / alignment * alignment;
  for (auto& t : infos) {
    uint64_t count = io_detail::file_nbytes(*reader, t.shape, uint8,
                                            "tensor '" + t.name + "'");
    const Dtype* dtype = nullptr;
    for (auto& [code, d] : kTensorTypes) {
      if (code == t.type) {
        dtype = &d;
      }
    }
    if (t.offset > reader->size()) {
      load_error(*reader,
                 "Data of tensor '" + t.name + "' lies outside the file");
    }
    uint64_t at = data_start + t.offset;
    if (dtype) {
      uint64_t nbytes = io_detail::file_nbytes(*reader, t.shape, *dtype,
                                               "tensor '" + t.name + "'");
      if (!io_detail::within(at, nbytes, reader->size())) {
        load_error(*reader,
                   "Data of tensor '" + t.name + "' lies outside the file");
      }
      result.first.insert_or_assign(
          t.name, array(t.shape, *dtype,
                        std::make_shared<Load>(stream, reader, at, false,
                                               t.shape, *dtype),
                        {}));
      continue;
    }
    if (t.type != kTQ4_0 && t.type != kTQ4_1 && t.type != kTQ8_0) {
      load_error(*reader, "Tensor '" + t.name + "' has the GGML type " +
                              ggml_name(t.type) + " (" +
                              std::to_string(t.type) +
                              "), which Fluxion does not load (supported: "
                              "F32, F16, BF16, F64, I8, I16, I32, I64, Q4_0, "
                              "Q4_1, Q8_0)");
    }
    if (t.shape.empty() || t.shape.back() <= 0 || t.shape.back() % 32 != 0) {
      // (A last dimension of 0 also divided by zero below.)
      load_error(*reader, "Quantized tensor '" + t.name +
                              "' needs a positive last dimension divisible "
                              "by 32");
    }
    int cols = t.shape.back();
    int rows = static_cast<int>(count / cols);
    size_t block_bytes =
        t.type == kTQ4_0 ? 18 : t.type == kTQ4_1 ? 20 : 34;
    uint64_t nbytes = count / 32 * block_bytes;
    if (!io_detail::within(at, nbytes, reader->size())) {
      load_error(*reader,
                 "Data of tensor '" + t.name + "' lies outside the file");
    }
    std::string raw(nbytes, '\0');
    io_detail::read_exact(*reader, raw.data(), nbytes, at, "quantized tensor");
    auto parts = dequant_blocks(raw, t.type, rows, cols);
    // Back to the tensor's own leading dims.
    Shape ws = t.shape, ss = t.shape;
    ws.back() = parts[0].shape(-1);
    ss.back() = parts[1].shape(-1);
    std::string base = t.name;
    const std::string suffix = ".weight";
    if (base.size() > suffix.size() &&
        base.compare(base.size() - suffix.size(), suffix.size(), suffix) ==
            0) {
      base = base.substr(0, base.size() - suffix.size());
    }
    result.first.insert_or_assign(base + ".weight",
                                  reshape(parts[0], ws, stream));
    result.first.insert_or_assign(base + ".scales",
                                  reshape(parts[1], ss, stream));
    result.first.insert_or_assign(base + ".biases",
                                  reshape(parts[2], ss, stream));
  }
  return result;
}

GGUFLoad load_gguf(const std::string& file, StreamOrDevice s) {
  return load_gguf(std::make_shared<io::FileReader>(file), s);
}

}  // namespace fluxion
