// The seam between the core and the backends: allocators per device, the
// memory API per device, streams / events / fences dispatched by device,
// the primitive registry, and the errors of a build without GPU backend.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <set>
#include <thread>

#include "fluxion/backend/common/caching_allocator.h"
#include "fluxion/backend_interface.h"
#include "fluxion/eager.h"
#include "fluxion/primitive_registry.h"
#include "fluxion/scheduler.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

// A caching allocator over plain malloc that counts the system's calls.
class CountingAllocator : public common::CachingAllocator {
 public:
  explicit CountingAllocator(size_t limit) : CachingAllocator(limit) {}
  std::atomic<int> system_mallocs{0};
  std::atomic<int> system_frees{0};
  std::atomic<size_t> system_bytes{0};
  bool refuse = false;

 protected:
  void* system_malloc(size_t bytes) override {
    if (refuse) {
      return nullptr;
    }
    system_mallocs++;
    system_bytes += bytes;
    return std::malloc(bytes);
  }
  void system_free(void* p, size_t bytes) override {
    system_frees++;
    system_bytes -= bytes;
    std::free(p);
  }
};

// A device allocator registered once for a gpu index nothing else uses:
// the slots are per process, and the tests of this file may run in one.
constexpr int kTestGpu = 63;
CountingAllocator& test_gpu_allocator() {
  static auto* a = [] {
    auto* p = new CountingAllocator(1 << 30);
    allocator::register_allocator(Device(Device::gpu, kTestGpu), p);
    return p;
  }();
  return *a;
}

const Stream kGpuStream(1, Device::gpu);

}  // namespace

// ---- Allocators ----------------------------------------------------------

TEST(Allocator, BucketSizes) {
  using A = common::CachingAllocator;
  EXPECT_EQ(A::bucket_size(1), 64u);
  EXPECT_EQ(A::bucket_size(64), 64u);
  EXPECT_EQ(A::bucket_size(65), 128u);
  EXPECT_EQ(A::bucket_size(1 << 16), size_t(1) << 16);
  EXPECT_EQ(A::bucket_size((1 << 16) + 1), size_t(2) << 16);
  EXPECT_EQ(A::bucket_size(3 << 20), size_t(3) << 20);
}

TEST(Allocator, CachesReusesAndEvicts) {
  CountingAllocator a(1 << 20);
  void* p = a.malloc(1000);  // a 1024-byte bucket
  EXPECT_EQ(a.active_memory(), 1024u);
  EXPECT_EQ(a.peak_memory(), 1024u);
  a.free(p, 1000);
  EXPECT_EQ(a.active_memory(), 0u);
  EXPECT_EQ(a.cache_memory(), 1024u);
  // Same bucket: served from the cache, no system call.
  void* q = a.malloc(600);
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.system_mallocs.load(), 1);
  EXPECT_EQ(a.cache_memory(), 0u);
  a.free(q, 600);
  a.reset_peak_memory();
  EXPECT_EQ(a.peak_memory(), 0u);
  // Limits: the setters return the previous value; a cache over its new
  // limit is emptied.
  EXPECT_EQ(a.set_memory_limit(12345), size_t(1) << 20);
  EXPECT_EQ(a.memory_limit(), 12345u);
  EXPECT_EQ(a.cache_limit(), size_t(1) << 20);
  EXPECT_EQ(a.set_cache_limit(100), size_t(1) << 20);
  EXPECT_EQ(a.cache_memory(), 0u);
  EXPECT_EQ(a.system_frees.load(), 1);
  // Above the cache limit a freed block goes back at once.
  void* big = a.malloc(4096);
  a.free(big, 4096);
  EXPECT_EQ(a.cache_memory(), 0u);
  EXPECT_EQ(a.system_bytes.load(), 0u);
  // The largest blocks are evicted first.
  a.set_cache_limit(3000);
  void* b1 = a.malloc(1024);
  void* b2 = a.malloc(2048);
  a.free(b2, 2048);
  a.free(b1, 1024);  // 3072 > 3000: the 2048 block goes
  EXPECT_EQ(a.cache_memory(), 1024u);
  a.clear_cache();
  EXPECT_EQ(a.cache_memory(), 0u);
  EXPECT_EQ(a.system_bytes.load(), 0u);
}

TEST(Allocator, FailureIsAClearError) {
  CountingAllocator a(1 << 20);
  a.refuse = true;
  expect_error<std::runtime_error>([&] { a.malloc(100); },
                                   "[malloc] Unable to allocate 100 bytes.");
}

TEST(Allocator, SlotsPerDevice) {
  EXPECT_TRUE(allocator::has_allocator(Device::cpu));
  EXPECT_EQ(&allocator::get(Device::cpu), &allocator::get(Device::cpu));
  if (!is_available(Device::gpu)) {
    EXPECT_FALSE(allocator::has_allocator(Device::gpu));
    expect_error<std::invalid_argument>(
        [] { allocator::get(Device::gpu); },
        "[allocator] Cannot use the gpu's memory: " + detail::no_gpu_reason());
  }
  expect_error<std::invalid_argument>(
      [] { allocator::get(Device(Device::cpu, 1)); },
      "There is no cpu 1 allocator.");
  expect_error<std::invalid_argument>(
      [] { allocator::register_allocator(Device::cpu, &allocator::get(Device::cpu)); },
      "[register_allocator]");
  auto& g = test_gpu_allocator();
  Device d(Device::gpu, kTestGpu);
  EXPECT_EQ(&allocator::get(d), &g);
  expect_error<std::invalid_argument>(
      [&] { allocator::register_allocator(d, &g); }, "already has");
}

TEST(Allocator, BufferKnowsItsDevice) {
  auto& g = test_gpu_allocator();
  Device d(Device::gpu, kTestGpu);
  clear_cache(d);
  size_t before = get_active_memory(d);
  {
    Data host(1 << 12);
    EXPECT_EQ(host.device(), Device::cpu);
    Data dev(1 << 12, d);
    EXPECT_EQ(dev.device(), d);
    EXPECT_EQ(get_active_memory(d), before + (1 << 12));
    EXPECT_EQ(g.active_memory(), before + (1 << 12));
  }
  // Each block went back to its own device's allocator.
  EXPECT_EQ(get_active_memory(d), before);
  EXPECT_EQ(get_cache_memory(d), size_t(1) << 12);
  clear_cache(d);
  EXPECT_EQ(get_cache_memory(d), 0u);
  // An array's fresh memory on a device.
  array x(Shape{16}, float32, nullptr, {});
  x.set_data(x.nbytes(), d);
  EXPECT_EQ(x.data_shared_ptr()->device(), d);
  EXPECT_EQ(get_active_memory(d), before + 64);
}

// ---- The memory API per device -------------------------------------------

TEST(Memory, PerDevice) {
  // Without a device argument: the default device's allocator (MLX's
  // signatures).
  ASSERT_EQ(default_device(), Device::cpu);
  array a = full({1 << 18}, 1.0f);
  a.eval();
  synchronize();  // no worker frees anything while we compare
  EXPECT_EQ(get_active_memory(), get_active_memory(Device::cpu));
  EXPECT_EQ(get_memory_limit(), get_memory_limit(Device::cpu));
  size_t old = set_memory_limit(size_t(1) << 40, Device::cpu);
  EXPECT_EQ(get_memory_limit(), size_t(1) << 40);
  EXPECT_EQ(set_memory_limit(old), size_t(1) << 40);
  EXPECT_EQ(get_memory_limit(Device::cpu), old);
  size_t old_cache = set_cache_limit(size_t(1) << 40, Device::cpu);
  EXPECT_EQ(set_cache_limit(old_cache), size_t(1) << 40);
  reset_peak_memory(Device::cpu);
  EXPECT_EQ(get_peak_memory(Device::cpu), 0u);
  // clear_cache() and reset_peak_memory() reach every device.
  auto& g = test_gpu_allocator();
  Device d(Device::gpu, kTestGpu);
  { Data dev(256, d); }
  EXPECT_GT(get_cache_memory(d), 0u);
  clear_cache(Device::cpu);
  EXPECT_EQ(get_cache_memory(Device::cpu), 0u);
  EXPECT_GT(g.cache_memory(), 0u);  // another device's cache is its own
  clear_cache(d);
  if (!is_available(Device::gpu)) {
    for (auto f : {+[] { get_active_memory(Device::gpu); },
                   +[] { get_peak_memory(Device::gpu); },
                   +[] { get_cache_memory(Device::gpu); },
                   +[] { set_memory_limit(1, Device::gpu); },
                   +[] { clear_cache(Device::gpu); }}) {
      expect_error<std::invalid_argument>(
          f, "Cannot use the gpu's memory: " + detail::no_gpu_reason());
    }
    expect_error<std::invalid_argument>(
        [] { get_active_memory(Device::gpu); }, "[get_active_memory]");
    // The no-argument forms never touch the missing gpu.
    clear_cache();
    reset_peak_memory();
    EXPECT_EQ(get_cache_memory(), 0u);
  }
}

// ---- Streams, events and fences dispatched by device ----------------------

TEST(StreamSeam, CpuEventsSignalAndWait) {
  Stream s = new_stream(Device::cpu);
  Event e(s);
  EXPECT_EQ(e.handle(), nullptr);  // the CPU attaches nothing
  e.set_value(1);
  EXPECT_FALSE(e.is_signaled());
  // A task blocks the stream until released, so the signal queued after it
  // cannot have run.
  std::atomic<bool> release{false};
  scheduler::enqueue(s, [&] {
    while (!release.load()) {
      std::this_thread::yield();
    }
  });
  e.signal(s);
  EXPECT_FALSE(e.is_signaled());
  release = true;
  e.wait();
  EXPECT_TRUE(e.is_signaled());
  // wait(stream) on a reached event queues nothing.
  e.wait(s);
  synchronize(s);
}

TEST(StreamSeam, EventOrdersTwoCpuStreams) {
  Stream a = new_stream(Device::cpu);
  Stream b = new_stream(Device::cpu);
  Event e(a);
  e.set_value(1);
  std::atomic<int> order{0};
  int seen_by_b = -1;
  std::atomic<bool> release{false};
  scheduler::enqueue(a, [&] {
    while (!release.load()) {
      std::this_thread::yield();
    }
    order = 1;
  });
  e.signal(a);
  e.wait(b);  // b waits for a's signal before its next task
  scheduler::enqueue(b, [&] { seen_by_b = order.load(); });
  release = true;
  synchronize(b);
  EXPECT_EQ(seen_by_b, 1);
}

TEST(StreamSeam, FencesAcrossStreamsInOneEval) {
  Stream a = new_stream(Device::cpu);
  Stream b = new_stream(Device::cpu);
  array x = full({1000}, 2.0f, a);
  array y = exp(x, a);
  array z = add(y, full({1000}, 1.0f, b), b);  // y crosses streams
  z.eval();
  EXPECT_NEAR(z.data<float>()[999], std::exp(2.0f) + 1.0f, 1e-5);
  synchronize();
}

TEST(StreamSeam, KernelErrorsStillReachTheWaiter) {
  // An error raised on one stream reaches an eval waiting on another
  // (the event carries it through the CPU backend's signal).
  Stream a = new_stream(Device::cpu);
  array idx = array({5}, int32);
  array bad = take(arange(3.0f), idx, 0, a);
  array out = add(bad, array(1.0f), default_stream(Device::cpu));
  EXPECT_THROW(out.eval(), std::out_of_range);
  expect_close(arange(3.0f) + 1.0f, {1, 2, 3});
}

// ---- Without a GPU backend --------------------------------------------------

TEST(NoGpu, StreamsEventsAndSynchronize) {
  if (gpu_backend().built()) {
    GTEST_SKIP() << "a GPU backend is built";
  }
  EXPECT_FALSE(gpu_backend().built());
  // No gpu stream can be had ...
  expect_error<std::invalid_argument>([] { new_stream(Device::gpu); },
                                      "[new_stream] Cannot use the gpu");
  expect_error<std::invalid_argument>(
      [] { gpu_backend().new_stream(kGpuStream); },
      "[new_stream] Cannot use the gpu");
  // ... and an explicit one cannot be synchronized ...
  expect_error<std::invalid_argument>([] { synchronize(kGpuStream); },
                                      "[synchronize] Cannot use the gpu");
  // ... while synchronizing everything skips it.
  synchronize();
  // Events of a gpu stream never wait: nothing ever runs there.
  Event e(kGpuStream);
  e.set_value(1);
  e.signal(kGpuStream);
  EXPECT_TRUE(e.is_signaled());
  e.wait();
  Event c(default_stream(Device::cpu));
  c.set_value(1);
  c.wait(kGpuStream);  // queues nothing anywhere
  c.signal(c.stream());
  c.wait();
}

TEST(NoGpu, KernelsOfASampleOfPrimitivesRaise) {
  if (gpu_backend().built()) {
    GTEST_SKIP() << "a GPU backend is built";
  }
  array a({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2});
  const Stream g = kGpuStream;
  std::vector<std::pair<std::string, std::function<array()>>> ops = {
      {"Add", [&] { return add(a, a, g); }},
      {"Exp", [&] { return exp(a, g); }},
      {"Matmul", [&] { return matmul(a, a, g); }},
      {"Sum", [&] { return sum(a, false, g); }},
      {"Reshape", [&] { return reshape(a, {4}, g); }},
      {"Transpose", [&] { return transpose(a, g); }},
      {"Sort", [&] { return sort(a, -1, g); }},
      {"Arange", [&] { return arange(0.0, 4.0, 1.0, float32, g); }},
      {"AsType", [&] { return astype(a, int32, g); }},
  };
  for (auto& [name, make] : ops) {
    SCOPED_TRACE(name);
    array x = make();
    try {
      x.eval();
      ADD_FAILURE() << "eval on the gpu returned";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()),
                "[eval] Cannot run " + name +
                    " on the gpu: Fluxion was built without a GPU backend.");
    }
  }
  // async_eval raises the same, and the CPU keeps working afterwards.
  expect_error<std::runtime_error>([&] { async_eval({add(a, a, g)}); },
                                   "[eval] Cannot run Add on the gpu");
  // A gpu node fed by cpu work: the cpu part may run, the gpu part raises.
  array c = exp(a);
  expect_error<std::runtime_error>([&] { add(c, a, g).eval(); },
                                   "[eval] Cannot run Add on the gpu");
  expect_close(a + a, {2, 4, 6, 8});
  synchronize();
}

// ---- The registry -----------------------------------------------------------

TEST(Registry, OneEntryPerPrimitive) {
  auto& reg = primitive_registry();
  EXPECT_GT(reg.size(), 100u);
  std::set<std::string> names;
  for (auto& p : reg) {
    EXPECT_TRUE(names.insert(p.name).second) << "twice: " << p.name;
    EXPECT_TRUE(p.cpu) << p.name;
    EXPECT_NE(std::string(p.family), "");
  }
  auto* add_p = find_primitive("Add");
  ASSERT_NE(add_p, nullptr);
  EXPECT_STREQ(add_p->family, "binary");
  auto* inv = find_primitive("Inverse");
  ASSERT_NE(inv, nullptr);
  EXPECT_STREQ(inv->cls, "linalg::Inverse");
  EXPECT_STREQ(find_primitive("Reshape")->family, "view");
  EXPECT_EQ(find_primitive("Synchronizer"), nullptr);  // not an op
  EXPECT_EQ(find_primitive("Nope"), nullptr);
  EXPECT_TRUE(kernels_missing(Device::cpu).empty());
  if (!gpu_backend().built()) {
    EXPECT_EQ(kernels_missing(Device::gpu).size(), reg.size());
  }
}

// Every primitive a transformer or a language model needs (issue 29:
// norms and their backward pass, RoPE, attention, sorting and selection,
// scans, quantized products) has a CUDA kernel in a build with the CUDA
// backend.
TEST(Registry, TransformerPathHasGpuKernels) {
  if (!gpu_backend().built()) {
    GTEST_SKIP() << "built without the CUDA backend";
  }
  for (const char* name :
       {"LayerNorm", "RMSNorm", "NormVJP", "RoPE", "ScaledDotProductAttention",
        "Sort", "ArgSort", "Partition", "ArgPartition", "Scan", "SearchSorted",
        "QuantizedMatmul", "Hadamard"}) {
    auto* p = find_primitive(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_TRUE(p->gpu) << name << " has no GPU kernel";
  }
}

// Which device type reads files is each backend's answer
// (host_primitive_device), and it agrees with the registry: a backend runs
// Load on its own streams exactly where it has Load's kernel; the others
// send it to the CPU, which has one.
TEST(Registry, LoadRunsWhereItsBackendSays) {
  EXPECT_EQ(cpu_backend().host_primitive_device(), Device::cpu);
  EXPECT_EQ(gpu_backend().host_primitive_device(), Device::cpu);
  for (auto t : {Device::cpu, Device::gpu}) {
    auto missing = kernels_missing(t);
    bool has_load =
        std::find(missing.begin(), missing.end(), "Load") == missing.end();
    EXPECT_EQ(backend(t).host_primitive_device() == t, has_load);
  }
}

TEST(Registry, NamesMatchThePrimitives) {
  // Graphs of computed arrays, kept lazy (fluxion/eager.h).
  fluxion::detail::EagerOff lazy_graphs;
  // The registry's name is what name() returns (but for the primitives
  // that print a parameter: Reduce as Sum, ArgReduce as ArgMax...).
  array a({1.0f, 2.0f});
  EXPECT_STREQ(exp(a).primitive().name(), find_primitive("Exp")->name);
  EXPECT_STREQ(reshape(a, {2, 1}).primitive().name(),
               find_primitive("Reshape")->name);
  EXPECT_STREQ(linalg::inv(array({2.0f}, {1, 1})).primitive().name(),
               "Inverse");
}
