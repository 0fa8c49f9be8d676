// The C++ side of issue 11's names: fluxion/ops/compat.h, linalg::det and
// slogdet, fft::fftfreq / apply_norm, reflect and symmetric padding,
// linspace(endpoint), integer arange, roll with several shifts, topk(0),
// the quantization modes, FP8, GGUF, export_function, the singleton
// distributed group, device_info, and the stream model (per-thread
// defaults, thread-owned / thread-unsafe / thread-local streams). Values
// are checked against hand-computed ones.
#include <cstdio>
#include <thread>

#include "fluxion/distributed.h"
#include "fluxion/export.h"
#include "test_utils.h"
#include "fluxion/eager.h"

using namespace fluxion;
using namespace fluxion::test;

TEST(Compat, TruncLogicalXorCountNonzero) {
  expect_close(trunc(array({-1.5f, -0.5f, 0.0f, 0.5f, 2.7f})),
               {-1, 0, 0, 0, 2});
  EXPECT_EQ(trunc(array({3, -4})).dtype(), int32);
  expect_error<std::invalid_argument>(
      [] { trunc(astype(array({1.0f}), complex64)); }, "[trunc]");
  expect_close(logical_xor(array({true, true, false, false}),
                           array({true, false, true, false})),
               {0, 1, 1, 0});
  auto c = array({0, 1, 0, 2, 3, 0}, {2, 3});
  expect_close(count_nonzero(c, std::nullopt), {3});
  expect_close(count_nonzero(c, std::vector<int>{0}), {1, 2, 0});
  EXPECT_EQ(count_nonzero(c, std::nullopt).dtype(), int32);
}

TEST(Compat, Median) {
  auto x = array({3.0f, 1.0f, 4.0f, 1.0f, 5.0f, 9.0f}, {2, 3});
  expect_close(median(x, std::nullopt), {3.5});
  expect_close(median(x, std::vector<int>{1}), {3, 5});
  expect_close(median(x, std::vector<int>{0}), {2, 3, 6.5});
  EXPECT_EQ(median(x, std::vector<int>{1}, true).shape(), Shape({2, 1}));
  EXPECT_EQ(median(array({1, 2, 3}), std::nullopt).dtype(), float32);
  expect_close(median(array({1.0f, NAN, 0.0f}), std::nullopt), {kNaN});
  expect_error<std::invalid_argument>(
      [] { median(zeros({0}), std::vector<int>{0}); },
      "[median] Cannot take the median of an empty");
  expect_error<std::invalid_argument>(
      [&] { median(x, std::vector<int>{1, 1}); }, "[median] Received dup");
  expect_error<std::invalid_argument>(
      [&] { median(x, std::vector<int>{2}); }, "[median] Invalid axis 2");
}

TEST(Compat, DiffFlipUnstack) {
  auto a = array({1, 2, 4, 7, 0});
  expect_close(diff(a), {1, 2, 3, -7});
  expect_close(diff(a, 2), {1, 1, -10});
  expect_close(diff(a, 0), {1, 2, 4, 7, 0});
  EXPECT_EQ(diff(a, 9).shape(), Shape({0}));
  expect_close(diff(a, 1, -1, array(0), array(10)), {1, 1, 2, 3, -7, 10});
  expect_close(diff(array({true, false, false})), {1, 0});
  expect_error<std::invalid_argument>([&] { diff(a, -1); },
                                      "[diff] The order n must be");
  expect_error<std::invalid_argument>([&] { diff(a, 1, 1); },
                                      "[diff] Invalid axis 1 for array with 1");
  auto m = iota({2, 3});
  expect_close(flip(m, std::nullopt), {5, 4, 3, 2, 1, 0});
  expect_close(flip(m, std::vector<int>{1}), {2, 1, 0, 5, 4, 3});
  expect_close(flip(m, std::vector<int>{-2}), {3, 4, 5, 0, 1, 2});
  auto parts = unstack(m, 1);
  ASSERT_EQ(parts.size(), 3u);
  expect_close(parts[2], {2, 5});
  EXPECT_EQ(parts[0].shape(), Shape({2}));
  expect_error<std::invalid_argument>([] { unstack(array(1.0f)); },
                                      "[unstack] Cannot unstack a 0-d");
}

TEST(Compat, VecdotMatrixNormWindowsEmpty) {
  auto a = iota({2, 3});
  expect_close(vecdot(a, array({1.0f, 0.0f, -1.0f})), {-2, -2});
  expect_close(vecdot(a, a, 0), {9, 17, 29});
  expect_error<std::invalid_argument>(
      [] { vecdot(array({1.0f, 2.0f}), array({1.0f})); },
      "[vecdot] The arrays must have the same size");
  expect_close(matrix_norm(a), {std::sqrt(55.0)}, 1e-6);
  expect_close(matrix_norm(a, 1.0), {7});
  expect_error<std::invalid_argument>([] { matrix_norm(array({1.0f})); },
                                      "[matrix_norm]");
  // NumPy's values.
  expect_close(hanning(5), {0, 0.5, 1, 0.5, 0}, 1e-6, 1e-7);
  expect_close(hamming(3), {0.08, 1, 0.08}, 1e-6, 1e-7);
  expect_close(bartlett(5), {0, 0.5, 1, 0.5, 0}, 1e-6, 1e-7);
  expect_close(blackman(3), {0, 1, 0}, 1e-6, 1e-6);
  EXPECT_EQ(hanning(0).shape(), Shape({0}));
  expect_close(hanning(1), {1});
  EXPECT_EQ(empty({2, 3}, int8).shape(), Shape({2, 3}));
  EXPECT_EQ(empty_like(a).dtype(), float32);
}

TEST(Compat, DetSlogdet) {
  auto a = array({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2});
  expect_close(linalg::det(a), {-2}, 1e-5);
  auto [s, l] = linalg::slogdet(a);
  expect_close(s, {-1});
  expect_close(l, {std::log(2.0)}, 1e-5);
  expect_close(linalg::det(array({2, 0, 0, 3}, {2, 2})), {6}, 1e-6);
  expect_close(linalg::det(ones({4, 4})), {0}, 0, 1e-6);
  auto [s0, l0] = linalg::slogdet(ones({3, 3}));
  expect_close(s0, {0});
  expect_close(l0, {-kInf});
  expect_close(linalg::det(zeros({2, 0, 0})), {1, 1});
  expect_error<std::invalid_argument>([] { linalg::det(zeros({2, 3})); },
                                      "[linalg::det] Arrays must be batches");
  expect_error<std::invalid_argument>(
      [] { linalg::slogdet(zeros({3})); },
      "[linalg::slogdet] Arrays must have at least two");
}

TEST(Compat, FftFreqAndNorm) {
  expect_close(fft::fftfreq(5, 0.5), {0, 0.4, 0.8, -0.8, -0.4}, 1e-7);
  expect_close(fft::rfftfreq(4), {0, 0.25, 0.5});
  expect_error<std::invalid_argument>([] { fft::fftfreq(0); },
                                      "[fftfreq] n must be positive; got 0");
  expect_error<std::invalid_argument>([] { fft::rfftfreq(3, 0.0); },
                                      "[rfftfreq] The sample spacing");
  auto x = array({1.0f, 1.0f, 1.0f, 1.0f});
  auto f = fft::fft(x);
  expect_close(real(fft::apply_norm(f, 4, false, "ortho")), {2, 0, 0, 0});
  expect_close(real(fft::apply_norm(f, 4, false, "forward")), {1, 0, 0, 0});
  expect_close(fft::apply_norm(f, 4, false, "backward"), {4, 0, 0, 0});
  expect_error<std::invalid_argument>(
      [&] { fft::apply_norm(f, 4, false, "bad"); }, "Invalid norm 'bad'");
}

TEST(Compat, PadReflectSymmetric) {
  auto a = array({0.0f, 1.0f, 2.0f, 3.0f});
  expect_close(pad(a, {2, 3}, array(0.0f), "reflect"),
               {2, 1, 0, 1, 2, 3, 2, 1, 0});
  expect_close(pad(a, {2, 3}, array(0.0f), "symmetric"),
               {1, 0, 0, 1, 2, 3, 3, 2, 1});
  // Several periods.
  expect_close(pad(array({0.0f, 1.0f}), {3, 3}, array(0.0f), "reflect"),
               {1, 0, 1, 0, 1, 0, 1, 0});
  expect_close(pad(array({5.0f}), {2, 1}, array(0.0f), "reflect"),
               {5, 5, 5, 5});
  expect_error<std::invalid_argument>(
      [] { pad(zeros({0}), 1, array(0.0f), "symmetric"); },
      "[pad] Cannot pad the empty axis 0 in 'symmetric' mode.");
}

TEST(Compat, CreationAndSorting) {
  expect_close(linspace(0.0, 10.0, 5, false), {0, 2, 4, 6, 8});
  expect_close(linspace(0.0, 1.0, 3, true), {0, 0.5, 1});
  expect_close(arange(0.0, 3.0, 0.5, int32), {0, 0, 0, 0, 0, 0});
  expect_close(arange(-1.0, -5.0, -1.5, int32), {-1, -2, -3});
  auto r = roll(iota({2, 3}), Shape{1, 1}, std::vector<int>{1});
  expect_close(r, {1, 2, 0, 4, 5, 3});
  auto r2 = roll(iota({2, 3}), Shape{1}, std::vector<int>{0, 1});
  expect_close(r2, {5, 3, 4, 2, 0, 1});
  expect_error<std::invalid_argument>(
      [] { roll(iota({2, 3}), Shape{1, 2, 3}, std::vector<int>{0, 1}); },
      "[roll] shift and axis");
  EXPECT_EQ(topk(iota({2, 3}), 0, 1).shape(), Shape({2, 0}));
}

TEST(Compat, QuantizeModes) {
  auto w = array({0.5f, -6.0f, 3.0f, 1.0f}, {1, 4});
  auto wide = tile(w, {2, 8});  // (2, 32)
  for (auto mode : {"mxfp4", "nvfp4", "mxfp8"}) {
    auto q = quantize(wide, std::nullopt, std::nullopt, mode);
    ASSERT_EQ(q.size(), 2u) << mode;
    EXPECT_EQ(q[1].dtype(), uint8);
    auto back = dequantize(q[0], q[1], std::nullopt, std::nullopt,
                           std::nullopt, mode);
    EXPECT_TRUE(array_equal(back, wide).item<bool>()) << mode;
  }
  for (int bits : {3, 5, 6}) {
    auto [wq, s, b] = quantize(tile(w, {2, 16}), 64, bits);
    EXPECT_EQ(wq.shape(), Shape({2, 64 * bits / 32}));
    auto back = dequantize(wq, s, b, 64, bits);
    // Affine quantization is exact up to half a step of the group's range.
    double step = 9.0 / ((1 << bits) - 1);
    EXPECT_TRUE(
        allclose(back, tile(w, {2, 16}), 0, step / 2 + 1e-5).item<bool>())
        << bits;
    auto grid = tile(array({0.0f, 7.0f, 3.0f, 1.0f}, {1, 4}), {2, 16});
    auto [gq, gs, gb] = quantize(grid, 64, 3);  // step 1: exact
    EXPECT_TRUE(array_equal(dequantize(gq, gs, gb, 64, 3), grid)
                    .item<bool>());
  }
  expect_error<std::invalid_argument>(
      [&] { quantize(wide, 64, std::nullopt, "nvfp4"); },
      "[quantize] The nvfp4 mode uses groups of 16");
  expect_error<std::invalid_argument>(
      [&] { quantization_mode("int4", "quantize"); },
      "[quantize] Invalid quantization mode 'int4'");
}

TEST(Compat, Fp8) {
  auto v = array({448.0f, -3.0f, 0.015625f, 0.0f, 1000.0f});
  auto c = to_fp8(v);
  EXPECT_EQ(c.dtype(), uint8);
  expect_close(astype(c, int32), {0x7E, 0xC4, 0x08, 0, 0x7E});
  expect_close(from_fp8(c, float32), {448, -3, 0.015625, 0, 448});
  expect_error<std::invalid_argument>([] { from_fp8(array({1.0f})); },
                                      "[from_fp8] Expected uint8");
}

TEST(Compat, GgufRoundTrip) {
  std::string path = ::testing::TempDir() + "compat_test.gguf";
  std::unordered_map<std::string, array> arrays = {
      {"a", iota({2, 3})}, {"b", array({1, 2, 3}, {3}, int16)}};
  std::unordered_map<std::string, GGUFMetaData> meta = {
      {"s", std::string("x")},
      {"l", std::vector<std::string>{"p", "q"}},
      {"n", array(5, uint32)}};
  save_gguf(path, arrays, meta);
  auto [out, m] = load_gguf(path);
  EXPECT_TRUE(array_equal(out.at("a"), arrays.at("a")).item<bool>());
  EXPECT_EQ(out.at("b").dtype(), int16);
  EXPECT_EQ(std::get<std::string>(m.at("s")), "x");
  EXPECT_EQ(std::get<std::vector<std::string>>(m.at("l")).size(), 2u);
  EXPECT_EQ(std::get<array>(m.at("n")).item<uint32_t>(), 5u);
  expect_error<std::invalid_argument>(
      [&] { save_gguf(path, {{"c", array({true})}}); },
      "[save_gguf] Array 'c' has dtype bool");
  std::remove(path.c_str());
}

TEST(Compat, ExportImport) {
  // Graphs of computed arrays, kept lazy (fluxion/eager.h).
  fluxion::detail::EagerOff lazy_graphs;
  std::string path = ::testing::TempDir() + "compat_test.fxfn";
  auto constant = iota({3});
  KwFn fun = [constant](const std::vector<array>& args, const Kwargs& kw) {
    array out = exp(args[0]) + constant;
    if (kw.count("y")) {
      out = out * kw.at("y");
    }
    return std::vector<array>{out, sum(out)};
  };
  FunctionExporter e(path, fun, /*shapeless=*/true, "meta");
  e({zeros({3})});
  e({zeros({3})}, {{"y", array(2.0f)}});
  e.close();
  expect_error<std::runtime_error>([&] { e({zeros({3})}); }, "closed");
  ImportedFunction f(path);
  EXPECT_EQ(f.metadata(), "meta");
  EXPECT_TRUE(f.shapeless());
  // Shapeless: a new length cannot be added to the traced constant of
  // length 3: an error naming the op (issue 33 item 3; the Add kernel read
  // its two inputs of lengths 5 and 3 as if both had 5 elements).
  auto x = array({0.0f, 1.0f, 0.0f, 1.0f, 2.0f});
  expect_error<std::invalid_argument>(
      [&] { f({x}, {{"y", array(2.0f)}}); },
      "[compile] shapeless: the inputs of Add were traced with equal shapes");
  auto x3 = array({0.0f, 1.0f, 2.0f});
  auto ref = fun({x3}, {{"y", array(2.0f)}});
  auto out = f({x3}, {{"y", array(2.0f)}});
  EXPECT_TRUE(allclose(out[0], ref[0]).item<bool>());
  EXPECT_TRUE(allclose(out[1], ref[1]).item<bool>());
  expect_error<std::invalid_argument>([&] { f({x3, x3}); },
                                      "[import_function] No function");
  auto [name, args] = export_primitive(*exp(x).primitive_ptr());
  EXPECT_EQ(name, "Exp");
  expect_error<std::invalid_argument>(
      [] { import_primitive("NoSuchPrimitive", {}, to_stream({})); },
      "[import_function] Unknown primitive 'NoSuchPrimitive'");
  expect_error<std::invalid_argument>(
      [] { import_primitive("Reshape", {}, to_stream({})); },
      "[import_function] Invalid parameters for the primitive Reshape");
  std::remove(path.c_str());
}

TEST(Compat, Distributed) {
  auto g = distributed::init();
  EXPECT_EQ(g.rank(), 0);
  EXPECT_EQ(g.size(), 1);
  // MPI is available where libmpi loads; without mpirun the group is still
  // this process alone.
  EXPECT_EQ(distributed::is_available(),
            distributed::is_available("mpi") ||
                distributed::is_available("nccl"));
  // NCCL needs a GPU (and libnccl).
  if (!is_available(Device::gpu)) {
    EXPECT_FALSE(distributed::is_available("nccl"));
  }
  auto x = iota({3});
  EXPECT_EQ(distributed::all_sum(x).id(), x.id());
  EXPECT_EQ(distributed::all_gather(x, g).id(), x.id());
  expect_error<std::invalid_argument>([&] { distributed::send(x, 0); },
                                      "[send] Cannot send to rank 0");
  expect_error<std::invalid_argument>(
      [&] { distributed::recv({3}, float32, 2); },
      "[recv] Invalid rank 2 for a group of size 1");
  expect_error<std::runtime_error>([] { distributed::init(true); },
                                   "[distributed.init] No multi-process");
}

TEST(Compat, DevicesAndWiredLimit) {
  EXPECT_EQ(device_count(Device::cpu), 1);
  auto info = device_info(Device::cpu);
  EXPECT_FALSE(std::get<std::string>(info.at("device_name")).empty());
  EXPECT_GT(std::get<size_t>(info.at("memory_size")), 0u);
  expect_error<std::invalid_argument>(
      [] { device_info(Device(Device::gpu, 0)); }, "[device_info]");
  size_t old = set_wired_limit(123);
  EXPECT_EQ(set_wired_limit(old), 123u);
  expect_error<std::invalid_argument>(
      [] { set_wired_limit(physical_memory() + 1); }, "[set_wired_limit]");
  expect_error<std::invalid_argument>([] { default_stream(Device::gpu); },
                                      "[default_stream]");
}

TEST(Compat, StreamOwnership) {
  Stream mine = new_stream(Device::cpu);
  Stream shared = new_thread_unsafe_stream(Device::cpu);
  auto tls = new_thread_local_stream(Device::cpu);
  Stream my_local = stream_from_thread_local_stream(tls);
  EXPECT_EQ(stream_from_thread_local_stream(tls), my_local);
  std::string error;
  Stream their_local = my_local;
  std::thread t([&] {
    try {
      eval(add(iota({2}), iota({2}), mine));
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
    EXPECT_EQ(to_vector<float>(add(iota({2}), iota({2}), shared))[1], 2.0f);
    their_local = stream_from_thread_local_stream(tls);
    EXPECT_EQ(to_vector<float>(add(iota({2}), iota({2}), their_local))[1],
              2.0f);
    // Defaults are per thread.
    set_default_stream(their_local);
    clear_streams();
    EXPECT_NE(default_stream(Device::cpu), their_local);
  });
  t.join();
  EXPECT_NE(error.find("[eval] Stream"), std::string::npos) << error;
  EXPECT_NE(their_local, my_local);
  EXPECT_NE(default_stream(Device::cpu), their_local);
  expect_error<std::runtime_error>(
      [&] { eval(add(iota({2}), iota({2}), their_local)); },
      "ended by clear_streams()");
  EXPECT_EQ(to_vector<float>(add(iota({2}), iota({2}), mine))[1], 2.0f);
}
