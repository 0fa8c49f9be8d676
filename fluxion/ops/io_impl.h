// Internals shared by the .npy, .npz and safetensors code (not public).
#pragma once

#include <string>

#include "fluxion/ops/io.h"

namespace fluxion::io_detail {

// "[load] <problem> in file '<label>'" as std::invalid_argument.
[[noreturn]] void load_error(const io::Reader& r, const std::string& what);

// Exactly n bytes at offset, or a "[load] Truncated ..." error naming `what`.
void read_exact(io::Reader& r, char* dst, uint64_t n, uint64_t offset,
                const char* what);

// Whether n bytes at `offset` lie inside data of `size` bytes (no overflow:
// offsets and sizes come from hostile files).
inline bool within(uint64_t offset, uint64_t n, uint64_t size) {
  return offset <= size && n <= size - offset;
}

// The bytes of a shape of `dtype` read from a file, or a "[load] ... too
// large" error (never std::overflow_error's "[array]" message, nor a product
// that wraps around).
uint64_t file_nbytes(const io::Reader& r, const Shape& shape, Dtype dtype,
                     const std::string& what);

// `file` with `ext` appended unless it already ends with it.
std::string with_extension(std::string file, const std::string& ext);

// The array's bytes in row-major order: its own buffer when it is
// row-contiguous, else a copy in `tmp`. Evaluates `a`.
const char* row_major_bytes(array& a, std::string& tmp);

// The .npy serialization of `a`: header (returned) then data.
std::string npy_header(const array& a);
void write_npy(io::Writer& w, array a);

// The stream a load reads on: the one `s` names, unless its device's
// backend says another device type runs Load (Backend::
// host_primitive_device: reading a file is host work, and no GPU backend
// has a Load kernel). There the read runs on that type's default stream
// (the CPU's), and the arrays, whose home is then the host, are uploaded
// once by their first GPU op. So mx.load works where the GPU is the
// default device.
Stream load_stream(StreamOrDevice s);

// The lazy array stored as .npy at `base` in `r` (parses the header now).
array npy_array(const std::shared_ptr<io::Reader>& r, uint64_t base, Stream s);

// A reader over one deflated zip member of `base`: read(dst, n, off)
// inflates the member from its start, discarding `off` bytes, so nothing is
// cached between reads. size() is the uncompressed size. When a read
// reaches the end of the member its CRC-32 is checked.
class InflateReader : public io::Reader {
 public:
  InflateReader(std::shared_ptr<io::Reader> base, uint64_t offset,
                uint64_t compressed, uint64_t uncompressed, uint32_t crc,
                std::string label)
      : base_(std::move(base)),
        offset_(offset),
        compressed_(compressed),
        uncompressed_(uncompressed),
        crc_(crc),
        label_(std::move(label)) {}
  void read(char* dst, size_t n, uint64_t offset) override;
  uint64_t size() const override { return uncompressed_; }
  const std::string& label() const override { return label_; }

 private:
  std::shared_ptr<io::Reader> base_;
  uint64_t offset_, compressed_, uncompressed_;
  uint32_t crc_;
  std::string label_;
};

}  // namespace fluxion::io_detail
