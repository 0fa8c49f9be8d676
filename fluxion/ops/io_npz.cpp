// .npz: a zip archive of .npy members, stored or deflated. The zip reader
// and writer are written here (local headers, central directory, end
// record); zlib provides CRC-32 and deflate/inflate. ZIP64 is rejected.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>
#include <vector>

#include "fluxion/ops/io.h"
#include "fluxion/ops/io_impl.h"

namespace fluxion {

namespace io_detail {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint64_t kMax32 = 0xffffffffu;
constexpr size_t kChunk = 1 << 20;

uint32_t crc_of(uint32_t crc, const char* p, uint64_t n) {
  while (n > 0) {
    uInt k = static_cast<uInt>(std::min<uint64_t>(n, 1u << 30));
    crc = static_cast<uint32_t>(
        ::crc32(crc, reinterpret_cast<const Bytef*>(p), k));
    p += k;
    n -= k;
  }
  return crc;
}

// Little-endian field access.
uint32_t get(const char* p, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return v;
}
void put(std::string& s, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    s += static_cast<char>((v >> (8 * i)) & 0xff);
  }
}

// Bytes [offset, offset + length) of another reader: bounds one stored
// member so that a short member cannot read into the next one.
class SliceReader : public io::Reader {
 public:
  SliceReader(std::shared_ptr<io::Reader> base, uint64_t offset,
              uint64_t length, std::string label)
      : base_(std::move(base)),
        offset_(offset),
        length_(length),
        label_(std::move(label)) {}
  void read(char* dst, size_t n, uint64_t offset) override {
    if (offset > length_ || n > length_ - offset) {
      throw std::runtime_error("[load] Member '" + label_ + "' is truncated.");
    }
    base_->read(dst, n, offset_ + offset);
  }
  uint64_t size() const override { return length_; }
  const std::string& label() const override { return label_; }

 private:
  std::shared_ptr<io::Reader> base_;
  uint64_t offset_, length_;
  std::string label_;
};

struct Member {
  std::string name;
  std::string header;
  const char* data;
  uint64_t nbytes;
};

// Writes a zip archive of .npy members.
void write_zip(io::Writer& w,
               const std::unordered_map<std::string, array>& arrays,
               bool compress, const char* op) {
  std::map<std::string, array> sorted(arrays.begin(), arrays.end());
  std::string central;
  uint64_t offset = 0;
  uint16_t count = 0;
  if (sorted.size() > 0xfffe) {
    throw std::invalid_argument(std::string("[") + op + "] Too many arrays (" +
                                std::to_string(sorted.size()) +
                                "); ZIP64 archives are not supported.");
  }
  for (auto& [key, value] : sorted) {
    array a = value;
    std::string tmp;
    const char* data = row_major_bytes(a, tmp);
    std::string header = npy_header(a);
    std::string name = key + ".npy";
    uint64_t size = header.size() + a.nbytes();
    uint32_t crc =
        crc_of(crc_of(0, header.data(), header.size()), data, a.nbytes());
    std::string packed;
    if (compress) {
      z_stream zs{};
      if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8,
                       Z_DEFAULT_STRATEGY) != Z_OK) {
        throw std::runtime_error(std::string("[") + op +
                                 "] zlib deflateInit2 failed.");
      }
      std::vector<char> buf(kChunk);
      auto pump = [&](const char* p, uint64_t n, bool last) {
        do {
          uInt k = static_cast<uInt>(std::min<uint64_t>(n, 1u << 30));
          zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(p));
          zs.avail_in = k;
          p += k;
          n -= k;
          int flush = last && n == 0 ? Z_FINISH : Z_NO_FLUSH;
          int ret;
          do {
            zs.next_out = reinterpret_cast<Bytef*>(buf.data());
            zs.avail_out = static_cast<uInt>(buf.size());
            ret = deflate(&zs, flush);
            packed.append(buf.data(), buf.size() - zs.avail_out);
          } while (zs.avail_out == 0 ||
                   (flush == Z_FINISH && ret != Z_STREAM_END));
        } while (n > 0);
      };
      pump(header.data(), header.size(), false);
      pump(data, a.nbytes(), true);
      deflateEnd(&zs);
    }
    uint64_t stored = compress ? packed.size() : size;
    if (size >= kMax32 || stored >= kMax32 || offset >= kMax32) {
      throw std::invalid_argument(
          std::string("[") + op + "] Array '" + key +
          "' or the archive exceeds 4 GiB; ZIP64 archives are not "
          "supported.");
    }
    // Local header: version 2.0, no flags, fixed date 1980-01-01.
    auto fields = [&](std::string& s) {
      put(s, 20, 2);
      put(s, 0, 2);
      put(s, compress ? 8 : 0, 2);
      put(s, 0, 2);
      put(s, 0x21, 2);
      put(s, crc, 4);
      put(s, static_cast<uint32_t>(stored), 4);
      put(s, static_cast<uint32_t>(size), 4);
      put(s, static_cast<uint32_t>(name.size()), 2);
      put(s, 0, 2);
    };
    std::string local;
    put(local, kLocalSig, 4);
    fields(local);
    local += name;
    put(central, kCentralSig, 4);
    put(central, 20, 2);  // made by: version 2.0
    fields(central);
    put(central, 0, 2);  // comment
    put(central, 0, 2);  // disk
    put(central, 0, 2);  // internal attributes
    put(central, 0, 4);  // external attributes
    put(central, static_cast<uint32_t>(offset), 4);
    central += name;
    w.write(local.data(), local.size());
    if (compress) {
      w.write(packed.data(), packed.size());
    } else {
      w.write(header.data(), header.size());
      w.write(data, a.nbytes());
    }
    offset += local.size() + stored;
    ++count;
  }
  if (offset + central.size() >= kMax32) {
    throw std::invalid_argument(std::string("[") + op +
                                "] The archive exceeds 4 GiB; ZIP64 archives "
                                "are not supported.");
  }
  std::string end;
  put(end, kEndSig, 4);
  put(end, 0, 2);
  put(end, 0, 2);
  put(end, count, 2);
  put(end, count, 2);
  put(end, static_cast<uint32_t>(central.size()), 4);
  put(end, static_cast<uint32_t>(offset), 4);
  put(end, 0, 2);
  w.write(central.data(), central.size());
  w.write(end.data(), end.size());
}

}  // namespace

void InflateReader::read(char* dst, size_t n, uint64_t offset) {
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("[load] Corrupt compressed member in '" + label_ +
                             "': " + why + ".");
  };
  if (offset > uncompressed_ || n > uncompressed_ - offset) {
    fail("read past its end");
  }
  z_stream zs{};
  if (inflateInit2(&zs, -15) != Z_OK) {
    throw std::runtime_error("[load] zlib inflateInit2 failed.");
  }
  struct Guard {
    z_stream* z;
    ~Guard() { inflateEnd(z); }
  } guard{&zs};
  std::vector<char> in(std::min<uint64_t>(kChunk, compressed_ + 1));
  std::vector<char> scratch(std::min<uint64_t>(kChunk, offset + 1));
  uint64_t read_in = 0, produced = 0, target = offset + n;
  bool check = target == uncompressed_;
  uint32_t crc = 0;
  while (produced < target) {
    if (zs.avail_in == 0) {
      uint64_t k = std::min<uint64_t>(in.size(), compressed_ - read_in);
      if (k == 0) {
        fail("the deflate stream ends early");
      }
      base_->read(in.data(), k, offset_ + read_in);
      read_in += k;
      zs.next_in = reinterpret_cast<Bytef*>(in.data());
      zs.avail_in = static_cast<uInt>(k);
    }
    char* out;
    uint64_t room;
    if (produced < offset) {
      out = scratch.data();
      room = std::min<uint64_t>(scratch.size(), offset - produced);
    } else {
      out = dst + (produced - offset);
      room = std::min<uint64_t>(target - produced, 1u << 30);
    }
    zs.next_out = reinterpret_cast<Bytef*>(out);
    zs.avail_out = static_cast<uInt>(room);
    int ret = inflate(&zs, Z_NO_FLUSH);
    if (ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR) {
      fail(zs.msg ? zs.msg : "inflate error " + std::to_string(ret));
    }
    uint64_t got = room - zs.avail_out;
    if (check) {
      crc = crc_of(crc, out, got);
    }
    produced += got;
    if (ret == Z_STREAM_END) {
      break;
    }
  }
  if (produced < target) {
    fail("it inflates to fewer bytes than its declared size");
  }
  if (check) {
    if (crc != crc_) {
      fail("CRC-32 mismatch");
    }
  }
}

}  // namespace io_detail

void savez(std::shared_ptr<io::Writer> out,
           const std::unordered_map<std::string, array>& arrays) {
  io_detail::write_zip(*out, arrays, false, "savez");
}

void savez(std::string file,
           const std::unordered_map<std::string, array>& arrays) {
  io::FileWriter w(io_detail::with_extension(std::move(file), ".npz"), "savez");
  io_detail::write_zip(w, arrays, false, "savez");
}

void savez_compressed(std::shared_ptr<io::Writer> out,
                      const std::unordered_map<std::string, array>& arrays) {
  io_detail::write_zip(*out, arrays, true, "savez_compressed");
}

void savez_compressed(std::string file,
                      const std::unordered_map<std::string, array>& arrays) {
  io::FileWriter w(io_detail::with_extension(std::move(file), ".npz"),
                   "savez_compressed");
  io_detail::write_zip(w, arrays, true, "savez_compressed");
}

std::unordered_map<std::string, array> load_npz(std::shared_ptr<io::Reader> in,
                                                StreamOrDevice s) {
  using io_detail::get;
  using io_detail::load_error;
  using io_detail::read_exact;
  Stream stream = io_detail::load_stream(s);
  uint64_t size = in->size();
  // The end record is in the last 22 + 65535 (comment) bytes.
  uint64_t tail = std::min<uint64_t>(size, 22 + 65535);
  if (size < 22) {
    load_error(*in, "Not a zip archive (.npz): too short");
  }
  std::string buf(tail, '\0');
  in->read(buf.data(), tail, size - tail);
  int64_t pos = -1;
  for (int64_t i = static_cast<int64_t>(tail) - 22; i >= 0; --i) {
    if (get(&buf[i], 4) == io_detail::kEndSig) {
      pos = i;
      break;
    }
  }
  if (pos < 0) {
    load_error(*in, "Not a zip archive (.npz): no end of central directory");
  }
  uint64_t end_at = size - tail + pos;
  if (end_at >= 20 && pos >= 20 &&
      get(&buf[pos - 20], 4) == io_detail::kZip64LocatorSig) {
    load_error(*in, "ZIP64 archives are not supported");
  }
  const char* e = &buf[pos];
  uint32_t entries = get(e + 10, 2);
  uint64_t cd_size = get(e + 12, 4), cd_offset = get(e + 16, 4);
  if (entries == 0xffff || cd_size == io_detail::kMax32 ||
      cd_offset == io_detail::kMax32) {
    load_error(*in, "ZIP64 archives are not supported");
  }
  if (get(e + 4, 2) != 0 || get(e + 6, 2) != 0) {
    load_error(*in, "Multi-disk zip archives are not supported");
  }
  if (cd_offset + cd_size > end_at) {
    load_error(*in, "Corrupt zip archive: central directory out of bounds");
  }
  std::string cd(cd_size, '\0');
  in->read(cd.data(), cd_size, cd_offset);
  std::unordered_map<std::string, array> out;
  size_t p = 0;
  for (uint32_t k = 0; k < entries; ++k) {
    if (p + 46 > cd.size() || get(&cd[p], 4) != io_detail::kCentralSig) {
      load_error(*in, "Corrupt zip archive: bad central directory entry");
    }
    const char* c = &cd[p];
    uint32_t flags = get(c + 8, 2), method = get(c + 10, 2);
    uint32_t crc = get(c + 16, 4);
    uint64_t comp = get(c + 20, 4), uncomp = get(c + 24, 4);
    uint32_t nlen = get(c + 28, 2), xlen = get(c + 30, 2),
             clen = get(c + 32, 2);
    uint64_t local = get(c + 42, 4);
    if (p + 46 + nlen + xlen + clen > cd.size()) {
      load_error(*in, "Corrupt zip archive: bad central directory entry");
    }
    std::string name = cd.substr(p + 46, nlen);
    p += 46 + nlen + xlen + clen;
    if (comp == io_detail::kMax32 || uncomp == io_detail::kMax32 ||
        local == io_detail::kMax32) {
      load_error(*in,
                 "ZIP64 archives are not supported (member '" + name + "')");
    }
    if (flags & 1) {
      load_error(*in,
                 "Encrypted zip members are not supported ('" + name + "')");
    }
    if (method != 0 && method != 8) {
      load_error(*in, "Unsupported zip compression method " +
                          std::to_string(method) + " for member '" + name +
                          "'");
    }
    char lh[30];
    read_exact(*in, lh, 30, local, "zip local header");
    if (get(lh, 4) != io_detail::kLocalSig) {
      load_error(*in, "Corrupt zip archive: bad local header for member '" +
                          name + "'");
    }
    uint64_t data = local + 30 + get(lh + 26, 2) + get(lh + 28, 2);
    if (data > cd_offset || comp > cd_offset - data) {
      load_error(*in, "Corrupt zip archive: member '" + name +
                          "' lies outside the file");
    }
    // Deflate expands by at most 1032:1, so a member declaring more is
    // corrupt; checked here so that a hostile size never sizes a buffer.
    if (method == 8 && uncomp > comp * 1032 + 1024) {
      load_error(*in, "Corrupt zip archive: member '" + name + "' declares " +
                          std::to_string(uncomp) + " bytes from " +
                          std::to_string(comp) + " compressed bytes");
    }
    if (method == 0 && comp != uncomp) {
      load_error(*in, "Corrupt zip archive: stored member '" + name +
                          "' has different sizes");
    }
    std::string label = in->label() + "[" + name + "]";
    std::shared_ptr<io::Reader> r;
    if (method == 0) {
      r = std::make_shared<io_detail::SliceReader>(in, data, comp, label);
    } else {
      r = std::make_shared<io_detail::InflateReader>(in, data, comp, uncomp,
                                                     crc, label);
    }
    std::string key = name;
    if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0) {
      key.resize(key.size() - 4);
    }
    try {
      out.insert_or_assign(key, io_detail::npy_array(r, 0, stream));
    } catch (const std::runtime_error& err) {
      // Inflating the header can fail on corrupt data.
      throw std::invalid_argument(err.what());
    }
  }
  return out;
}

std::unordered_map<std::string, array> load_npz(const std::string& file,
                                                StreamOrDevice s) {
  return load_npz(std::make_shared<io::FileReader>(file), s);
}

}  // namespace fluxion
