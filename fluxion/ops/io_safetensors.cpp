// The safetensors format: an 8-byte little-endian header size, a JSON
// header {"name": {"dtype", "shape", "data_offsets"}, "__metadata__": {...}},
// then the tensors' bytes (offsets relative to the end of the header).
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "fluxion/ops/io.h"
#include "fluxion/ops/io_impl.h"

namespace fluxion {

namespace {

using json = nlohmann::json;

const std::pair<const char*, Dtype> kTypes[] = {
    {"BOOL", bool_},  {"U8", uint8},     {"U16", uint16},    {"U32", uint32},
    {"U64", uint64},  {"I8", int8},      {"I16", int16},     {"I32", int32},
    {"I64", int64},   {"F16", float16},  {"BF16", bfloat16}, {"F32", float32},
    {"F64", float64}, {"C64", complex64},
    // Loaded as their raw codes (MLX): from_fp8 decodes them. Saving uint8
    // finds "U8" first.
    {"F8_E4M3", uint8}};

const char* st_name(Dtype t) {
  for (auto& [n, d] : kTypes) {
    if (d == t) {
      return n;
    }
  }
  return "";  // every dtype is in the table
}

void write_safetensors(
    io::Writer& w, const std::unordered_map<std::string, array>& arrays,
    const std::unordered_map<std::string, std::string>& metadata) {
  std::map<std::string, array> sorted(arrays.begin(), arrays.end());
  json header = json::object();
  if (!metadata.empty()) {
    json m = json::object();
    for (auto& [k, v] : metadata) {
      m[k] = v;
    }
    header["__metadata__"] = m;
  }
  uint64_t offset = 0;
  for (auto& [key, a] : sorted) {
    if (key == "__metadata__") {
      throw std::invalid_argument(
          "[save_safetensors] '__metadata__' is reserved and cannot name an "
          "array.");
    }
    json shape = json::array();
    for (int d : a.shape()) {
      shape.push_back(d);
    }
    header[key] = {{"dtype", st_name(a.dtype())},
                   {"shape", shape},
                   {"data_offsets", {offset, offset + a.nbytes()}}};
    offset += a.nbytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {  // e.g. a name that is not UTF-8
    throw std::invalid_argument(
        std::string("[save_safetensors] Cannot write the header: ") + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // data 8-byte aligned
  std::string len;
  for (int i = 0; i < 8; ++i) {
    len += static_cast<char>((static_cast<uint64_t>(text.size()) >> (8 * i)) &
                             0xff);
  }
  w.write(len.data(), 8);
  w.write(text.data(), text.size());
  for (auto& [key, value] : sorted) {
    array a = value;
    std::string tmp;
    const char* bytes = io_detail::row_major_bytes(a, tmp);
    w.write(bytes, a.nbytes());
  }
}

}  // namespace

void save_safetensors(
    std::shared_ptr<io::Writer> out,
    const std::unordered_map<std::string, array>& arrays,
    const std::unordered_map<std::string, std::string>& metadata) {
  write_safetensors(*out, arrays, metadata);
}

void save_safetensors(
    std::string file, const std::unordered_map<std::string, array>& arrays,
    const std::unordered_map<std::string, std::string>& metadata) {
  io::FileWriter w(io_detail::with_extension(std::move(file), ".safetensors"),
                   "save_safetensors");
  write_safetensors(w, arrays, metadata);
}

SafetensorsLoad load_safetensors(std::shared_ptr<io::Reader> in,
                                 StreamOrDevice s) {
  using io_detail::load_error;
  Stream stream = io_detail::load_stream(s);
  char len_bytes[8];
  io_detail::read_exact(*in, len_bytes, 8, 0, "safetensors header size");
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) {
    hlen |= static_cast<uint64_t>(static_cast<unsigned char>(len_bytes[i]))
            << (8 * i);
  }
  if (hlen > in->size() - 8) {
    load_error(*in, "Truncated safetensors header (it declares " +
                        std::to_string(hlen) + " bytes, the file has " +
                        std::to_string(in->size() - 8) + " after the size)");
  }
  std::string text(hlen, '\0');
  in->read(text.data(), hlen, 8);
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    load_error(*in, std::string("Invalid JSON header (") + e.what() + ")");
  }
  if (!header.is_object()) {
    load_error(*in, "Invalid safetensors header (not a JSON object)");
  }
  uint64_t base = 8 + hlen;
  uint64_t data_size = in->size() - base;
  SafetensorsLoad result;
  for (auto& item : header.items()) {
    // Not a structured binding: clang 14 cannot capture one in the lambda
    // below.
    const std::string& key = item.key();
    auto& v = item.value();
    if (key == "__metadata__") {
      if (!v.is_object()) {
        load_error(*in,
                   "Invalid safetensors header ('__metadata__' is not "
                   "an object)");
      }
      for (auto& [mk, mv] : v.items()) {
        if (!mv.is_string()) {
          load_error(*in, "Invalid safetensors metadata (the value of '" + mk +
                              "' is not a string)");
        }
        result.second[mk] = mv.get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& why) {
      load_error(*in, "Invalid safetensors entry '" + key + "' (" + why + ")");
    };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets")) {
      bad("needs dtype, shape and data_offsets");
    }
    auto& dt = v["dtype"];
    if (!dt.is_string()) {
      bad("dtype is not a string");
    }
    std::string dname = dt.get<std::string>();
    const Dtype* dtype = nullptr;
    for (auto& [n, d] : kTypes) {
      if (dname == n) {
        dtype = &d;
      }
    }
    if (!dtype) {
      load_error(*in, "Unsupported safetensors dtype '" + dname +
                          "' for entry '" + key + "'");
    }
    Shape shape;
    if (!v["shape"].is_array()) {
      bad("shape is not a list");
    }
    for (auto& d : v["shape"]) {
      if (!d.is_number_unsigned() ||
          d.get<uint64_t>() >
              static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
        bad("bad shape dimension");
      }
      shape.push_back(static_cast<int32_t>(d.get<uint64_t>()));
    }
    auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned()) {
      bad("data_offsets must be two non-negative integers");
    }
    uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    uint64_t nbytes =
        io_detail::file_nbytes(*in, shape, *dtype, "entry '" + key + "'");
    if (b > e || e - b != nbytes) {
      bad("data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
          "] do not match " + std::to_string(nbytes) + " bytes");
    }
    if (e > data_size) {
      load_error(*in, "Data offsets of '" + key + "' lie outside the file (" +
                          std::to_string(e) + " > " +
                          std::to_string(data_size) + " data bytes)");
    }
    result.first.insert_or_assign(
        key, array(shape, *dtype,
                   std::make_shared<Load>(stream, in, base + b, false, shape,
                                          *dtype),
                   {}));
  }
  return result;
}

SafetensorsLoad load_safetensors(const std::string& file, StreamOrDevice s) {
  return load_safetensors(std::make_shared<io::FileReader>(file), s);
}

}  // namespace fluxion
