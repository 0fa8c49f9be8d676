// Readers, writers, the .npy format and the Load primitive's rules.
#include "fluxion/ops/io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "fluxion/backend_interface.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/io_impl.h"
#include "fluxion/ops/shape.h"

namespace fluxion {

namespace io {

FileReader::FileReader(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd_ < 0 || ::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    int err = errno;
    if (fd_ >= 0) {
      ::close(fd_);
    }
    throw std::invalid_argument(
        "[load] Failed to open file '" + path_ +
        "': " + (fd_ >= 0 ? "not a regular file" : std::strerror(err)) + ".");
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

FileReader::~FileReader() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

void FileReader::read(char* dst, size_t n, uint64_t offset) {
  size_t done = 0;
  while (done < n) {
    ssize_t r =
        ::pread(fd_, dst + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r < 0) {
      throw std::runtime_error("[load] Failed to read file '" + path_ +
                               "': " + std::strerror(errno) + ".");
    }
    if (r == 0) {
      throw std::runtime_error("[load] File '" + path_ +
                               "' is truncated: needed " + std::to_string(n) +
                               " bytes at offset " + std::to_string(offset) +
                               " (it changed after it was loaded?).");
    }
    done += static_cast<size_t>(r);
  }
}

void MemoryReader::read(char* dst, size_t n, uint64_t offset) {
  if (offset > bytes_.size() || n > bytes_.size() - offset) {
    throw std::runtime_error(
        "[load] Data in '" + label_ + "' is truncated: needed " +
        std::to_string(n) + " bytes at offset " + std::to_string(offset) + ".");
  }
  std::memcpy(dst, bytes_.data() + offset, n);
}

FileWriter::FileWriter(std::string path, const char* op)
    : path_(std::move(path)), op_(op) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw std::invalid_argument(std::string("[") + op_ +
                                "] Failed to open file '" + path_ +
                                "' for writing: " + std::strerror(errno) + ".");
  }
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

void FileWriter::write(const char* src, size_t n) {
  while (n > 0) {
    // Chunks of at most 8 MiB (one huge write is slower on Linux).
    ssize_t r = ::write(fd_, src, std::min<size_t>(n, size_t{1} << 23));
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      throw std::runtime_error(std::string("[") + op_ +
                               "] Failed to write file '" + path_ +
                               "': " + std::strerror(errno) + ".");
    }
    src += r;
    n -= static_cast<size_t>(r);
  }
}

}  // namespace io

namespace io_detail {

void load_error(const io::Reader& r, const std::string& what) {
  throw std::invalid_argument("[load] " + what + " in file '" + r.label() +
                              "'.");
}

void read_exact(io::Reader& r, char* dst, uint64_t n, uint64_t offset,
                const char* what) {
  if (offset > r.size() || n > r.size() - offset) {
    load_error(r, std::string("Truncated ") + what + " (needed " +
                      std::to_string(n) + " bytes at offset " +
                      std::to_string(offset) + ", the data has " +
                      std::to_string(r.size()) + ")");
  }
  r.read(dst, n, offset);
}

uint64_t file_nbytes(const io::Reader& r, const Shape& shape, Dtype dtype,
                     const std::string& what) {
  uint64_t n = 1;
  for (int32_t d : shape) {
    if (d < 0) {
      load_error(r, "Negative dimension in the shape of " + what);
    }
    if (d != 0 && n > (uint64_t{1} << 62) / static_cast<uint64_t>(d)) {
      load_error(r, "The shape of " + what + " is too large");
    }
    n *= static_cast<uint64_t>(d);
  }
  if (n > (uint64_t{1} << 62) / std::max<uint64_t>(dtype.size, 1)) {
    load_error(r, "The shape of " + what + " is too large");
  }
  return n * dtype.size;
}

std::string with_extension(std::string file, const std::string& ext) {
  if (file.size() < ext.size() ||
      file.compare(file.size() - ext.size(), ext.size(), ext) != 0) {
    file += ext;
  }
  return file;
}

const char* row_major_bytes(array& a, std::string& tmp) {
  a.eval();
  if (a.size() == 0) {
    return "";
  }
  if (a.flags().row_contiguous && a.data_size() == a.size()) {
    return static_cast<const char*>(a.raw_data());
  }
  // Gather element by element (any strides, broadcasts included).
  size_t item = a.itemsize();
  tmp.resize(a.nbytes());
  const char* src = static_cast<const char*>(a.raw_data());
  int nd = a.ndim();
  std::vector<int> idx(nd, 0);
  int64_t off = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    std::memcpy(&tmp[i * item], src + off * static_cast<int64_t>(item), item);
    for (int d = nd - 1; d >= 0; --d) {
      off += a.strides()[d];
      if (++idx[d] < a.shape(d)) {
        break;
      }
      off -= a.strides()[d] * a.shape(d);
      idx[d] = 0;
    }
  }
  return tmp.data();
}

namespace {

const char* kMagic = "\x93NUMPY";
constexpr uint64_t kMaxHeader = 1 << 20;

std::string descr_of(Dtype t) {
  switch (t.val) {
    case Dtype::Val::bool_:
      return "|b1";
    case Dtype::Val::uint8:
      return "|u1";
    case Dtype::Val::int8:
      return "|i1";
    case Dtype::Val::bfloat16:
      return "<V2";
    case Dtype::Val::complex64:
      return "<c8";
    default:
      break;
  }
  char kind = is_floating_point(t) ? 'f' : is_unsigned(t) ? 'u' : 'i';
  return std::string("<") + kind + std::to_string(t.size);
}

// Parses the header's Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  HeaderParser(const std::string& s, const io::Reader& r) : s_(s), r_(r) {}

  void parse(std::string& descr, bool& fortran, Shape& shape) {
    bool has_descr = false, has_order = false, has_shape = false;
    expect('{');
    while (true) {
      ws();
      if (peek() == '}') {
        break;
      }
      std::string key = str();
      ws();
      expect(':');
      ws();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"') {
          fail(
              "Unsupported dtype descr (structured dtypes are not "
              "supported)");
        }
        descr = str();
        has_descr = true;
      } else if (key == "fortran_order") {
        fortran = boolean();
        has_order = true;
      } else if (key == "shape") {
        shape = tuple();
        has_shape = true;
      } else {
        fail("Unexpected key '" + key + "' in the .npy header");
      }
      ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != '}') {
        fail("Malformed .npy header");
      }
    }
    if (!has_descr || !has_order || !has_shape) {
      fail("The .npy header lacks 'descr', 'fortran_order' or 'shape'");
    }
  }

 private:
  [[noreturn]] void fail(const std::string& m) { load_error(r_, m); }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) {
      ++i_;
    }
  }
  void expect(char c) {
    if (peek() != c) {
      fail(std::string("Malformed .npy header (expected '") + c + "')");
    }
    ++i_;
  }
  std::string str() {
    char q = peek();
    if (q != '\'' && q != '"') {
      fail("Malformed .npy header (expected a string)");
    }
    size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) {
      fail("Malformed .npy header (unterminated string)");
    }
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    fail("Malformed .npy header (fortran_order must be True or False)");
  }
  Shape tuple() {
    expect('(');
    Shape out;
    while (true) {
      ws();
      if (peek() == ')') {
        ++i_;
        return out;
      }
      if (!std::isdigit(static_cast<unsigned char>(peek()))) {
        fail("Malformed .npy header (bad shape)");
      }
      uint64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        v = v * 10 + static_cast<uint64_t>(s_[i_++] - '0');
        if (v > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
          fail("Shape dimension too large");
        }
      }
      if (peek() == 'L') {  // Python 2 longs
        ++i_;
      }
      out.push_back(static_cast<int32_t>(v));
      ws();
      if (peek() == ',') {
        ++i_;
      } else if (peek() != ')') {
        fail("Malformed .npy header (bad shape)");
      }
    }
  }

  const std::string& s_;
  const io::Reader& r_;
  size_t i_ = 0;
};

// dtype and whether bytes need swapping, from a descr such as '<f4'.
std::pair<Dtype, bool> parse_descr(const std::string& d, const io::Reader& r) {
  auto bad = [&]() { load_error(r, "Unsupported dtype descr '" + d + "'"); };
  if (d.size() < 3) {
    bad();
  }
  char order = d[0];
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    bad();
  }
  std::string code = d.substr(1);
  static const std::pair<const char*, Dtype> table[] = {
      {"b1", bool_},     {"u1", uint8},   {"u2", uint16},  {"u4", uint32},
      {"u8", uint64},    {"i1", int8},    {"i2", int16},   {"i4", int32},
      {"i8", int64},     {"f2", float16}, {"f4", float32}, {"f8", float64},
      {"c8", complex64}, {"V2", bfloat16}};
  for (auto& [c, t] : table) {
    if (code == c) {
      return {t, order == '>' && t.size > 1};
    }
  }
  bad();
  return {float32, false};  // unreachable
}

}  // namespace

std::string npy_header(const array& a) {
  std::string dict = "{'descr': '" + descr_of(a.dtype()) +
                     "', 'fortran_order': False, 'shape': (";
  for (int d = 0; d < a.ndim(); ++d) {
    dict += std::to_string(a.shape(d)) + (a.ndim() == 1 ? "," : "");
    if (d + 1 < a.ndim()) {
      dict += ", ";
    }
  }
  dict += "), }";
  // Pad with spaces and end with '\n' so the data starts at a multiple of
  // 64 bytes; version 1.0 holds headers up to 65535 bytes.
  bool v2 = dict.size() + 1 + 10 > 65535;
  size_t pre = v2 ? 12 : 10;
  size_t total = pre + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out(kMagic, 6);
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  uint32_t len = static_cast<uint32_t>(dict.size());
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) {
    out += static_cast<char>((len >> (8 * i)) & 0xff);
  }
  return out + dict;
}

void write_npy(io::Writer& w, array a) {
  std::string tmp;
  const char* bytes = row_major_bytes(a, tmp);
  std::string header = npy_header(a);
  w.write(header.data(), header.size());
  w.write(bytes, a.nbytes());
}

Stream load_stream(StreamOrDevice s) {
  Stream st = to_stream(s);
  // Which device runs Load is the backend's fact (D34: file loads stay on
  // the CPU's stream when the GPU is asked).
  auto runs_it = backend(st.device.type).host_primitive_device();
  return st.device == runs_it ? st : default_stream(runs_it);
}

array npy_array(const std::shared_ptr<io::Reader>& r, uint64_t base, Stream s) {
  char pre[12];
  read_exact(*r, pre, 8, base, ".npy header");
  if (std::memcmp(pre, kMagic, 6) != 0) {
    load_error(*r, "Invalid magic string (not a .npy file)");
  }
  int major = static_cast<unsigned char>(pre[6]);
  if (major < 1 || major > 3) {
    load_error(*r, "Unsupported .npy format version " + std::to_string(major));
  }
  size_t len_bytes = major == 1 ? 2 : 4;
  read_exact(*r, pre + 8, len_bytes, base + 8, ".npy header");
  uint64_t hlen = 0;
  for (size_t i = 0; i < len_bytes; ++i) {
    hlen |= static_cast<uint64_t>(static_cast<unsigned char>(pre[8 + i]))
            << (8 * i);
  }
  // Checked before allocating: version 2 and 3 headers declare up to
  // 4 GiB. Fluxion's dtypes need a few hundred bytes at most (NumPy itself
  // refuses headers over 10,000 bytes unless told otherwise); a header
  // longer than the data is "Truncated" (read_exact).
  if (hlen > kMaxHeader) {
    load_error(*r, "Invalid .npy header length " + std::to_string(hlen) +
                       " (headers are at most " + std::to_string(kMaxHeader) +
                       " bytes)");
  }
  std::string text(hlen, '\0');
  read_exact(*r, text.data(), hlen, base + 8 + len_bytes, ".npy header");
  std::string descr;
  bool fortran = false;
  Shape shape;
  HeaderParser(text, *r).parse(descr, fortran, shape);
  auto [dtype, swap] = parse_descr(descr, *r);
  uint64_t start = base + 8 + len_bytes + hlen;
  file_nbytes(*r, shape, dtype, "the .npy array");
  // A file too short for its data loads (only the header is read now);
  // the read at eval raises "[load] ... truncated" (RuntimeError), as MLX.
  // A Fortran-order file holds the transpose in C order.
  Shape stored = shape;
  if (fortran) {
    std::reverse(stored.begin(), stored.end());
  }
  array out(stored, dtype,
            std::make_shared<Load>(s, r, start, swap, stored, dtype), {});
  if (fortran && shape.size() > 1) {
    out = transpose(out, s);
  }
  return out;
}

}  // namespace io_detail

void save(std::shared_ptr<io::Writer> out, array a) {
  io_detail::write_npy(*out, std::move(a));
}

void save(std::string file, array a) {
  io::FileWriter w(io_detail::with_extension(std::move(file), ".npy"), "save");
  io_detail::write_npy(w, std::move(a));
}

array load(std::shared_ptr<io::Reader> in, StreamOrDevice s) {
  return io_detail::npy_array(in, 0, io_detail::load_stream(s));
}

array load(const std::string& file, StreamOrDevice s) {
  return load(std::make_shared<io::FileReader>(file), s);
}

// --- Load's rules (no inputs: see io.h) ---

bool Load::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& l = static_cast<const Load&>(o);
  return l.reader_ == reader_ && l.offset_ == offset_ && l.swap_ == swap_ &&
         l.shape_ == shape_ && l.dtype_ == dtype_;
}

std::vector<array> Load::vjp(const std::vector<array>& primals,
                             const std::vector<array>&,
                             const std::vector<int>& argnums,
                             const std::vector<array>&) {
  std::vector<array> out;
  for (int a : argnums) {
    out.push_back(zeros_like(primals[a], stream()));
  }
  return out;
}

std::vector<array> Load::jvp(const std::vector<array>&,
                             const std::vector<array>&,
                             const std::vector<int>&) {
  return {zeros(shape_, dtype_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Load::vmap(
    const std::vector<array>&, const std::vector<int>&) {
  return {{array(shape_, dtype_,
                 std::make_shared<Load>(stream(), reader_, offset_, swap_,
                                        shape_, dtype_),
                 {})},
          {-1}};
}

}  // namespace fluxion
