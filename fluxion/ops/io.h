// Saving and loading arrays: NumPy's .npy and .npz (stored or deflated zip
// members) and safetensors, as in MLX.
//
// Loading is lazy: `load` reads only the headers and returns arrays whose
// `Load` primitive reads the bytes (or inflates a compressed .npz member)
// when evaluated. The file stays open until every array loaded from it has
// been evaluated (or dropped), so removing or renaming the file in between
// does not change what is read (POSIX semantics). A file truncated in
// between gives a "[load] ... truncated" error at evaluation.
//
// Formats:
// - .npy: version 1.0 headers (2.0 when a header exceeds 65535 bytes),
//   padded so that the data starts at a multiple of 64 bytes, C order,
//   little-endian. bfloat16 is written with the descr '<V2' (a 2-byte void,
//   which is what MLX and ml_dtypes write); loading maps 'V2' back to
//   bfloat16. Big-endian descrs ('>') are byte-swapped when loaded;
//   fortran_order files load transposed into the logical shape (as MLX).
// - .npz: a zip archive of .npy members named "<key>.npy"; `savez` stores
//   them, `savez_compressed` deflates them (zlib). ZIP64 archives (as
//   written for members over 4 GiB) are rejected with a clear message.
// - .safetensors: an 8-byte little-endian header length, a JSON header
//   (padded with spaces to a multiple of 8 bytes), then the data. dtypes
//   BOOL, U8, U16, U32, U64, I8, I16, I32, I64, F16, BF16, F32, F64, C64,
//   and F8_E4M3 on load (as uint8 codes, which from_fp8 decodes).
// - .gguf (version 3): little-endian; typed key/value metadata, tensor
//   infos (dims innermost first), data aligned to general.alignment (32 by
//   default). Tensors F32, F16, BF16, F64, I8, I16, I32, I64 load lazily;
//   the block-quantized Q4_0, Q4_1 and Q8_0 load (eagerly) as MLX's affine
//   triplet "<base>.weight" (uint32, values repacked into Fluxion's order),
//   "<base>.scales", "<base>.biases" (float16, group size 32); other
//   quantized types raise. Metadata values: strings, lists of strings, and
//   scalars or 1-D arrays of bool / (u)int8..64 / float32 / float64.
//
// Errors at load time throw std::invalid_argument("[load] ...") naming the
// file and the problem; I/O errors at evaluation throw std::runtime_error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

namespace io {

// A source of bytes at absolute offsets; thread-safe.
class Reader {
 public:
  virtual ~Reader() = default;
  // Exactly `n` bytes at `offset` into `dst`, or a std::runtime_error
  // naming the source.
  virtual void read(char* dst, size_t n, uint64_t offset) = 0;
  // Total size in bytes (of the data at open time).
  virtual uint64_t size() const = 0;
  // For messages: the file name, or "<memory>".
  virtual const std::string& label() const = 0;
};

// A file opened once (kept open while the reader lives); reads with pread.
class FileReader : public Reader {
 public:
  explicit FileReader(std::string path);  // throws "[load] Failed to open"
  ~FileReader() override;
  void read(char* dst, size_t n, uint64_t offset) override;
  uint64_t size() const override { return size_; }
  const std::string& label() const override { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Bytes held in memory (used for Python file-like objects).
class MemoryReader : public Reader {
 public:
  MemoryReader(std::string bytes, std::string label = "<memory>")
      : bytes_(std::move(bytes)), label_(std::move(label)) {}
  void read(char* dst, size_t n, uint64_t offset) override;
  uint64_t size() const override { return bytes_.size(); }
  const std::string& label() const override { return label_; }

 private:
  std::string bytes_;
  std::string label_;
};

// A sink of bytes.
class Writer {
 public:
  virtual ~Writer() = default;
  virtual void write(const char* src, size_t n) = 0;
  virtual const std::string& label() const = 0;
};

class FileWriter : public Writer {
 public:
  // Creates or truncates `path`; throws std::invalid_argument("[<op>] ...").
  FileWriter(std::string path, const char* op);
  ~FileWriter() override;
  void write(const char* src, size_t n) override;
  const std::string& label() const override { return path_; }

 private:
  std::string path_;
  const char* op_;
  int fd_ = -1;
};

class MemoryWriter : public Writer {
 public:
  void write(const char* src, size_t n) override { bytes_.append(src, n); }
  const std::string& label() const override { return label_; }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
  std::string label_ = "<memory>";
};

}  // namespace io

using SafetensorsLoad = std::pair<std::unordered_map<std::string, array>,
                                  std::unordered_map<std::string, std::string>>;

// .npy: `file` gets ".npy" appended when it does not end with it.
void save(std::shared_ptr<io::Writer> out, array a);
void save(std::string file, array a);
array load(std::shared_ptr<io::Reader> in, StreamOrDevice s = {});
array load(const std::string& file, StreamOrDevice s = {});

// .npz: `file` gets ".npz" appended when it does not end with it. Keys are
// the member names without ".npy".
void savez(std::shared_ptr<io::Writer> out,
           const std::unordered_map<std::string, array>& arrays);
void savez(std::string file,
           const std::unordered_map<std::string, array>& arrays);
void savez_compressed(std::shared_ptr<io::Writer> out,
                      const std::unordered_map<std::string, array>& arrays);
void savez_compressed(std::string file,
                      const std::unordered_map<std::string, array>& arrays);
std::unordered_map<std::string, array> load_npz(std::shared_ptr<io::Reader> in,
                                                StreamOrDevice s = {});
std::unordered_map<std::string, array> load_npz(const std::string& file,
                                                StreamOrDevice s = {});

// .safetensors: `file` gets ".safetensors" appended when it does not end
// with it. Tensors are written in key order.
void save_safetensors(
    std::shared_ptr<io::Writer> out,
    const std::unordered_map<std::string, array>& arrays,
    const std::unordered_map<std::string, std::string>& metadata = {});
void save_safetensors(
    std::string file, const std::unordered_map<std::string, array>& arrays,
    const std::unordered_map<std::string, std::string>& metadata = {});
SafetensorsLoad load_safetensors(std::shared_ptr<io::Reader> in,
                                 StreamOrDevice s = {});
SafetensorsLoad load_safetensors(const std::string& file,
                                 StreamOrDevice s = {});

// GGUF metadata values.
using GGUFMetaData =
    std::variant<std::monostate, array, std::string, std::vector<std::string>>;
using GGUFLoad = std::pair<std::unordered_map<std::string, array>,
                           std::unordered_map<std::string, GGUFMetaData>>;
// `file` gets ".gguf" appended when it does not end with it. Tensors are
// written in key order; array metadata must be 0-d or 1-D, of an integer,
// bool, float32 or float64 type.
void save_gguf(std::string file,
               const std::unordered_map<std::string, array>& arrays,
               const std::unordered_map<std::string, GGUFMetaData>& metadata =
                   {});
void save_gguf(std::shared_ptr<io::Writer> out,
               const std::unordered_map<std::string, array>& arrays,
               const std::unordered_map<std::string, GGUFMetaData>& metadata =
                   {});
GGUFLoad load_gguf(std::shared_ptr<io::Reader> in, StreamOrDevice s = {});
GGUFLoad load_gguf(const std::string& file, StreamOrDevice s = {});

// Reads one array's bytes from a reader at `offset` when evaluated,
// swapping byte order if asked. It has no inputs, so the transformations
// never reach its rules (a node is transformed only through its inputs);
// they are complete anyway: its values depend on nothing differentiable
// (zero derivatives) and vmap leaves it unmapped (-1).
class Load : public Primitive {
 public:
  Load(Stream s, std::shared_ptr<io::Reader> reader, uint64_t offset,
       bool swap_endianness, Shape shape, Dtype dtype)
      : Primitive(s),
        reader_(std::move(reader)),
        offset_(offset),
        swap_(swap_endianness),
        shape_(std::move(shape)),
        dtype_(dtype) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Load"; }
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>&) override {
    return {shape_};
  }

 private:
  std::shared_ptr<io::Reader> reader_;
  uint64_t offset_;
  bool swap_;
  Shape shape_;
  Dtype dtype_;  // for the jvp and vmap rules, which get no outputs
};

}  // namespace fluxion
