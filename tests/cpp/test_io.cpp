// Array files: round trips of every dtype through .npy, .npz (stored and
// deflated) and safetensors, files crafted byte by byte (big-endian, Fortran
// order, corrupt or truncated data), and the laziness of `load`.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fluxion/ops/io.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

const Dtype kAll[] = {bool_,   uint8,   uint16,   uint32,   uint64,
                      int8,    int16,   int32,    int64,    float16,
                      float32, float64, bfloat16, complex64};

class IoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("fluxion_io_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

std::string read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

void write_file(const std::string& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), bytes.size());
}

// Values every dtype can hold exactly (bools alternate).
array sample(Dtype t, const Shape& shape = {2, 3}) {
  auto a = iota(shape, float64, 1);
  if (t == bool_) {
    return astype(remainder(a, array(2.0)), bool_);
  }
  if (t == complex64) {
    return astype(a, complex64) * array(std::complex<float>(1, -2));
  }
  return astype(a, t);
}

void expect_same(const array& got, const array& want) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_TRUE(array_equal(got, want).item<bool>());
}

std::string npy_bytes(const std::string& dict, const std::string& data) {
  std::string h = dict;
  h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
  h += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  return out + h + data;
}

}  // namespace

TEST_F(IoTest, NpyRoundTripEveryDtype) {
  for (Dtype t : kAll) {
    SCOPED_TRACE(t);
    auto a = sample(t);
    save(path("a.npy"), a);
    auto bytes = read_file(path("a.npy"));
    ASSERT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    size_t hlen = static_cast<unsigned char>(bytes[8]) |
                  (static_cast<unsigned char>(bytes[9]) << 8);
    EXPECT_EQ((10 + hlen) % 64, 0u);  // data 64-byte aligned
    EXPECT_EQ(bytes[10 + hlen - 1], '\n');
    EXPECT_EQ(bytes.size(), 10 + hlen + a.nbytes());
    auto b = load(path("a.npy"));
    expect_same(b, a);
  }
}

TEST_F(IoTest, NpyHeaderText) {
  save(path("h.npy"), zeros({2, 3}, bfloat16));
  auto bytes = read_file(path("h.npy"));
  EXPECT_NE(bytes.find("{'descr': '<V2', 'fortran_order': False, "
                       "'shape': (2, 3), }"),
            std::string::npos);
  save(path("v.npy"), zeros({5}, int16));
  EXPECT_NE(read_file(path("v.npy")).find("'shape': (5,)"), std::string::npos);
  save(path("s.npy"), array(3.5));
  EXPECT_NE(read_file(path("s.npy")).find("'shape': ()"), std::string::npos);
  EXPECT_EQ(load(path("s.npy")).item<double>(), 3.5);
  save(path("e.npy"), zeros({0, 4}, float32));
  EXPECT_EQ(load(path("e.npy")).shape(), (Shape{0, 4}));
}

TEST_F(IoTest, SaveAppendsExtension) {
  save(path("x"), array({1, 2, 3}));
  EXPECT_TRUE(std::filesystem::exists(path("x.npy")));
  savez(path("z"), {{"a", array({1})}});
  EXPECT_TRUE(std::filesystem::exists(path("z.npz")));
  save_safetensors(path("s"), {{"a", array({1})}});
  EXPECT_TRUE(std::filesystem::exists(path("s.safetensors")));
}

// Reading a file is host work: a load asked for on a GPU stream (there the
// default when a GPU is visible) reads on the CPU's default stream, so it
// works in every build; GPU ops upload the result when they first use it.
TEST_F(IoTest, LoadsOnAGpuStreamReadOnTheCpu) {
  Stream gpu_stream(0, Device::gpu);
  auto a = sample(float32);
  save(path("a.npy"), a);
  savez(path("a.npz"), {{"a", a}});
  save_safetensors(path("a.safetensors"), {{"a", a}});
  save_gguf(path("a.gguf"), {{"a", a}});
  std::vector<array> loaded = {
      load(path("a.npy"), gpu_stream),
      load_npz(path("a.npz"), gpu_stream).at("a"),
      load_safetensors(path("a.safetensors"), gpu_stream).first.at("a"),
      load_gguf(path("a.gguf"), gpu_stream).first.at("a")};
  for (auto& x : loaded) {
    EXPECT_EQ(x.primitive().stream(), default_stream(Device::cpu));
    expect_same(x, a);
  }
  // A CPU stream given explicitly is kept.
  Stream other = new_stream(Device::cpu);
  EXPECT_EQ(load(path("a.npy"), other).primitive().stream(), other);
}

TEST_F(IoTest, SavesStridedAndBroadcastArrays) {
  auto a = iota({3, 4, 5});
  auto t = transpose(a, {2, 0, 1});
  save(path("t.npy"), t);
  expect_same(load(path("t.npy")), copy(t));
  auto s = slice(a, {0, 1, 0}, {3, 4, 5}, {2, 2, 3});
  save(path("s.npy"), s);
  expect_same(load(path("s.npy")), copy(s));
  auto b = broadcast_to(array({1.f, 2.f}), {3, 2});
  savez_compressed(path("b.npz"), {{"b", b}});
  expect_same(load_npz(path("b.npz")).at("b"), copy(b));
  save_safetensors(path("b.safetensors"), {{"t", t}});
  expect_same(load_safetensors(path("b.safetensors")).first.at("t"), copy(t));
}

TEST_F(IoTest, BigEndianAndFortranOrder) {
  // 2x3 int32 [[1,2,3],[4,5,6]] stored big-endian in Fortran order:
  // 1 4 2 5 3 6.
  std::string data;
  for (int v : {1, 4, 2, 5, 3, 6}) {
    data += std::string("\0\0\0", 3) + static_cast<char>(v);
  }
  write_file(path("f.npy"), npy_bytes("{'descr': '>i4', 'fortran_order': True, "
                                      "'shape': (2, 3), }",
                                      data));
  auto a = load(path("f.npy"));
  EXPECT_EQ(a.dtype(), int32);
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  expect_close(a, {1, 2, 3, 4, 5, 6});
  // complex64 big-endian swaps each float32 half: 1+2j.
  std::string c("\x3f\x80\x00\x00\x40\x00\x00\x00", 8);
  write_file(path("c.npy"),
             npy_bytes("{\"descr\": \">c8\", \"fortran_order\": False, "
                       "\"shape\": (1,)}",
                       c));
  auto z = load(path("c.npy")).item<complex64_t>();
  EXPECT_EQ(z.real(), 1.0f);
  EXPECT_EQ(z.imag(), 2.0f);
  // A 1-byte type with '|' and a Python 2 long in the shape.
  write_file(path("u.npy"),
             npy_bytes("{'descr': '|u1', 'fortran_order': False, "
                       "'shape': (3L,), }",
                       "\x07\x08\x09"));
  expect_close(load(path("u.npy")), {7, 8, 9});
}

TEST_F(IoTest, LoadIsLazy) {
  save(path("l.npy"), array({1.f, 2.f, 3.f}));
  auto a = load(path("l.npy"));
  ASSERT_TRUE(a.has_primitive());
  EXPECT_STREQ(a.primitive().name(), "Load");
  EXPECT_EQ(a.status(), array::Status::unscheduled);
  // The bytes are read at evaluation: change them in place first.
  {
    std::fstream f(path("l.npy"),
                   std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(128);
    float v = 9.f;
    f.write(reinterpret_cast<char*>(&v), 4);
  }
  expect_close(a, {9, 2, 3});
  // The file stays open: removing it before evaluation changes nothing.
  auto b = load(path("l.npy"));
  std::filesystem::remove(path("l.npy"));
  expect_close(b * 2, {18, 4, 6});
  // Truncating it does: a clear error at evaluation.
  save(path("t.npy"), array({1.f, 2.f, 3.f}));
  auto c = load(path("t.npy"));
  std::filesystem::resize_file(path("t.npy"), 130);
  expect_error<std::runtime_error>([&] { c.eval(); }, "[load]");
}

TEST_F(IoTest, NpyErrors) {
  expect_error<std::invalid_argument>([&] { load(path("missing.npy")); },
                                      "[load] Failed to open file");
  write_file(path("magic.npy"), "NOTNUMPYxxxxxxxxxxxx");
  expect_error<std::invalid_argument>([&] { load(path("magic.npy")); },
                                      "Invalid magic string");
  write_file(path("short.npy"), std::string("\x93NUM", 4));
  expect_error<std::invalid_argument>([&] { load(path("short.npy")); },
                                      "Truncated .npy header");
  auto good =
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }",
                std::string(16, '\0'));
  write_file(path("th.npy"), good.substr(0, 40));
  expect_error<std::invalid_argument>([&] { load(path("th.npy")); },
                                      "Truncated .npy header");
  write_file(path("td.npy"), good.substr(0, good.size() - 1));
  // Truncated data loads (only the header is read); the read at eval
  // raises, as MLX.
  auto td = load(path("td.npy"));
  expect_error<std::runtime_error>([&] { eval(td); }, "truncated");
  auto with = [&](const std::string& dict) {
    write_file(path("d.npy"), npy_bytes(dict, std::string(64, '\0')));
    return path("d.npy");
  };
  expect_error<std::invalid_argument>(
      [&] {
        load(with("{'descr': '<c16', 'fortran_order': False, 'shape': (1,)}"));
      },
      "Unsupported dtype descr '<c16'");
  expect_error<std::invalid_argument>(
      [&] {
        load(with("{'descr': '<U3', 'fortran_order': False, 'shape': (1,)}"));
      },
      "Unsupported dtype descr '<U3'");
  expect_error<std::invalid_argument>(
      [&] {
        load(
            with("{'descr': [('a', '<i4')], 'fortran_order': False, "
                 "'shape': (1,)}"));
      },
      "structured");
  expect_error<std::invalid_argument>(
      [&] { load(with("{'descr': '<f4', 'fortran_order': Maybe}")); },
      "fortran_order");
  expect_error<std::invalid_argument>(
      [&] { load(with("{'descr': '<f4', 'shape': (1,)}")); }, "lacks");
  expect_error<std::invalid_argument>(
      [&] {
        load(with("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}"));
      },
      "bad shape");
  auto v9 = good;
  v9[6] = 9;
  write_file(path("v9.npy"), v9);
  expect_error<std::invalid_argument>([&] { load(path("v9.npy")); },
                                      "version 9");
  // Messages name the file.
  expect_error<std::invalid_argument>([&] { load(path("v9.npy")); }, "v9.npy");
}

TEST_F(IoTest, NpzRoundTripEveryDtype) {
  std::unordered_map<std::string, array> m;
  for (Dtype t : kAll) {
    std::ostringstream name;
    name << "a_" << t;
    m.insert_or_assign(name.str(), sample(t, {3, 2}));
  }
  m.insert_or_assign("empty", zeros({0}, float32));
  m.insert_or_assign("scalar", array(7));
  for (bool compressed : {false, true}) {
    SCOPED_TRACE(compressed);
    if (compressed) {
      savez_compressed(path("m.npz"), m);
    } else {
      savez(path("m.npz"), m);
    }
    auto got = load_npz(path("m.npz"));
    ASSERT_EQ(got.size(), m.size());
    for (auto& [k, v] : m) {
      SCOPED_TRACE(k);
      ASSERT_TRUE(got.count(k));
      EXPECT_STREQ(got.at(k).primitive().name(), "Load");
      expect_same(got.at(k), v);
    }
  }
  // Compression works (zeros shrink).
  savez(path("s.npz"), {{"z", zeros({10000})}});
  savez_compressed(path("c.npz"), {{"z", zeros({10000})}});
  EXPECT_LT(std::filesystem::file_size(path("c.npz")) * 20,
            std::filesystem::file_size(path("s.npz")));
}

TEST_F(IoTest, NpzErrors) {
  expect_error<std::invalid_argument>([&] { load_npz(path("none.npz")); },
                                      "[load] Failed to open");
  write_file(path("junk.npz"), std::string(100, 'x'));
  expect_error<std::invalid_argument>([&] { load_npz(path("junk.npz")); },
                                      "no end of central directory");
  write_file(path("tiny.npz"), "PK");
  expect_error<std::invalid_argument>([&] { load_npz(path("tiny.npz")); },
                                      "too short");
  savez(path("a.npz"), {{"x", iota({100})}});
  auto bytes = read_file(path("a.npz"));
  // Cut in the middle: the end record is gone.
  write_file(path("cut.npz"), bytes.substr(0, bytes.size() / 2));
  expect_error<std::invalid_argument>([&] { load_npz(path("cut.npz")); },
                                      "[load]");
  // Central directory offset pointing outside.
  auto bad = bytes;
  size_t end = bad.size() - 22;
  bad[end + 16] = '\xff';
  bad[end + 17] = '\x7f';
  write_file(path("off.npz"), bad);
  expect_error<std::invalid_argument>([&] { load_npz(path("off.npz")); },
                                      "central directory out of bounds");
  // A broken local header signature.
  bad = bytes;
  bad[0] = 'X';
  write_file(path("lh.npz"), bad);
  expect_error<std::invalid_argument>([&] { load_npz(path("lh.npz")); },
                                      "bad local header");
  // An unsupported compression method (12: bzip2) in the central directory.
  bad = bytes;
  size_t cd = bad.rfind("PK\x01\x02");
  bad[cd + 10] = 12;
  write_file(path("m.npz"), bad);
  expect_error<std::invalid_argument>([&] { load_npz(path("m.npz")); },
                                      "compression method 12");
  // ZIP64 markers.
  bad = bytes;
  bad[cd + 20] = bad[cd + 21] = bad[cd + 22] = bad[cd + 23] = '\xff';
  write_file(path("z64.npz"), bad);
  expect_error<std::invalid_argument>([&] { load_npz(path("z64.npz")); },
                                      "ZIP64");
  // A .npy member that is not one.
  bad = bytes;
  bad[bad.find("\x93NUMPY")] = 'Q';
  write_file(path("mg.npz"), bad);
  expect_error<std::invalid_argument>([&] { load_npz(path("mg.npz")); },
                                      "Invalid magic string");
  expect_error<std::invalid_argument>([&] { load_npz(path("mg.npz")); },
                                      "mg.npz[x.npy]");
}

TEST_F(IoTest, CompressedNpzCorruption) {
  auto x = iota({1000});
  savez_compressed(path("c.npz"), {{"x", x}});
  auto bytes = read_file(path("c.npz"));
  // Flip a byte late in the deflate stream: the header still inflates, the
  // data does not (or its CRC differs) -> an error at evaluation.
  size_t cd = bytes.rfind("PK\x01\x02");
  auto bad = bytes;
  bad[cd - 10] ^= 0x55;
  write_file(path("bad.npz"), bad);
  auto a = load_npz(path("bad.npz")).at("x");
  expect_error<std::runtime_error>([&] { a.eval(); },
                                   "[load] Corrupt compressed member");
  // A wrong CRC alone.
  bad = bytes;
  bad[cd + 16] ^= 1;
  write_file(path("crc.npz"), bad);
  auto b = load_npz(path("crc.npz")).at("x");
  expect_error<std::runtime_error>([&] { b.eval(); }, "CRC-32 mismatch");
  // Intact: inflates on evaluation.
  expect_same(load_npz(path("c.npz")).at("x"), x);
}

TEST_F(IoTest, SafetensorsRoundTrip) {
  std::unordered_map<std::string, array> m;
  for (Dtype t : kAll) {
    std::ostringstream name;
    name << "t." << t;
    m.insert_or_assign(name.str(), sample(t, {2, 2, 2}));
  }
  m.insert_or_assign("scalar", array(2.5f));
  m.insert_or_assign("empty", zeros({3, 0}, int8));
  save_safetensors(path("m.safetensors"), m, {{"format", "pt"}, {"note", "ü"}});
  auto bytes = read_file(path("m.safetensors"));
  uint64_t hlen = 0;
  std::memcpy(&hlen, bytes.data(), 8);
  EXPECT_EQ(hlen % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
  auto [got, meta] = load_safetensors(path("m.safetensors"));
  EXPECT_EQ(meta.size(), 2u);
  EXPECT_EQ(meta.at("format"), "pt");
  EXPECT_EQ(meta.at("note"), "ü");
  ASSERT_EQ(got.size(), m.size());
  for (auto& [k, v] : m) {
    SCOPED_TRACE(k);
    expect_same(got.at(k), v);
  }
  // The dtype names of the format.
  EXPECT_NE(bytes.find("\"BF16\""), std::string::npos);
  EXPECT_NE(bytes.find("\"C64\""), std::string::npos);
  EXPECT_NE(bytes.find("\"BOOL\""), std::string::npos);
}

TEST_F(IoTest, SafetensorsErrors) {
  auto craft = [&](const std::string& json, size_t data = 16) {
    std::string out;
    uint64_t n = json.size();
    out.append(reinterpret_cast<const char*>(&n), 8);
    out += json + std::string(data, '\0');
    write_file(path("c.safetensors"), out);
    return path("c.safetensors");
  };
  expect_error<std::invalid_argument>(
      [&] { load_safetensors(craft("{\"a\": {")); }, "Invalid JSON header");
  expect_error<std::invalid_argument>(
      [&] {
        load_safetensors(craft(
            R"({"a": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}})"));
      },
      "lie outside the file");
  expect_error<std::invalid_argument>(
      [&] {
        load_safetensors(craft(
            R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})"));
      },
      "do not match");
  expect_error<std::invalid_argument>(
      [&] {
        load_safetensors(craft(
            R"({"a": {"dtype": "F8_E5M2", "shape": [2], "data_offsets": [0, 2]}})"));
      },
      "Unsupported safetensors dtype 'F8_E5M2'");
  expect_error<std::invalid_argument>(
      [&] {
        load_safetensors(craft(R"({"a": {"dtype": "F32", "shape": [-2], )"
                               R"("data_offsets": [0, 8]}})"));
      },
      "bad shape dimension");
  expect_error<std::invalid_argument>(
      [&] { load_safetensors(craft(R"({"__metadata__": {"k": 3}})")); },
      "not a string");
  expect_error<std::invalid_argument>(
      [&] { load_safetensors(craft("[1, 2]")); }, "not a JSON object");
  // A header size beyond the file, and a file shorter than the size field.
  std::string big(8, '\xff');
  write_file(path("big.safetensors"), big + "{}");
  expect_error<std::invalid_argument>(
      [&] { load_safetensors(path("big.safetensors")); },
      "Truncated safetensors header");
  write_file(path("tiny.safetensors"), "abc");
  expect_error<std::invalid_argument>(
      [&] { load_safetensors(path("tiny.safetensors")); },
      "Truncated safetensors header size");
  expect_error<std::invalid_argument>(
      [&] {
        save_safetensors(path("r.safetensors"), {{"__metadata__", array({1})}});
      },
      "[save_safetensors]");
  expect_error<std::invalid_argument>(
      [&] {
        save_safetensors(path("u.safetensors"), {{"\xff", array({1})}});
      },
      "[save_safetensors] Cannot write the header");
}

TEST_F(IoTest, MemoryReaderAndWriter) {
  auto w = std::make_shared<io::MemoryWriter>();
  save(w, iota({2, 2}, int64));
  auto r = std::make_shared<io::MemoryReader>(w->bytes());
  expect_same(load(r), iota({2, 2}, int64));
}

TEST_F(IoTest, GradientThroughLoadedConstant) {
  save(path("w.npy"), array({1.0, -2.0, 3.0}));
  auto w = load(path("w.npy"));
  UnaryFn f = [&](const array& x) { return sum(x * w); };
  auto g = grad(f)(zeros({3}, float64));
  expect_close(g, {1, -2, 3});
}

TEST_F(IoTest, WriteErrors) {
  expect_error<std::invalid_argument>(
      [&] { save(path("no/such/dir/a.npy"), array({1})); },
      "[save] Failed to open file");
  expect_error<std::invalid_argument>(
      [&] { savez(path("no/such/dir/a.npz"), {}); }, "[savez]");
}
