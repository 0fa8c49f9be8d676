// The raw costs of CUDA calls on the machine at hand (host time per call):
// the floor under any eager per-op figure (docs/architecture.md, the CUDA
// backend's performance). Build and run on a GPU machine:
//   nvcc -O2 -arch=sm_90 -o /tmp/launch_cost benchmarks/gpu/launch_cost.cu && /tmp/launch_cost
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <vector>
#include <memory>
__global__ void add1(const float* x, float* y, long n) {
  long i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}
static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
int main() {
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  float* x; cudaMalloc(&x, 64 * sizeof(float));
  const int N = 20000;
  for (int i = 0; i < 100; ++i) add1<<<1, 256, 0, s>>>(x, x, 16);
  cudaStreamSynchronize(s);
  double t0 = now();
  for (int i = 0; i < N; ++i) add1<<<1, 256, 0, s>>>(x, x, 16);
  double t1 = now();
  cudaStreamSynchronize(s);
  double t2 = now();
  printf("launch (host) %.2f us, launch+drain %.2f us per kernel\n", (t1 - t0) / N * 1e6, (t2 - t0) / N * 1e6);
  t0 = now();
  for (int i = 0; i < N; ++i) { add1<<<1, 256, 0, s>>>(x, x, 16); cudaGetLastError(); }
  cudaStreamSynchronize(s);
  printf("launch+getlasterror+drain %.2f us\n", (now() - t0) / N * 1e6);
  t0 = now();
  for (int i = 0; i < 2000; ++i) { cudaEvent_t e; cudaEventCreateWithFlags(&e, cudaEventDisableTiming); cudaEventRecord(e, s); cudaEventDestroy(e); }
  printf("event create+record+destroy %.2f us\n", (now() - t0) / 2000 * 1e6);
  cudaEvent_t e; cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  t0 = now();
  for (int i = 0; i < N; ++i) { cudaEventRecord(e, s); }
  printf("event record %.2f us\n", (now() - t0) / N * 1e6);
  t0 = now();
  for (int i = 0; i < N; ++i) { cudaEventQuery(e); }
  printf("event query %.2f us\n", (now() - t0) / N * 1e6);
  cudaStreamSynchronize(s);
  t0 = now();
  for (int i = 0; i < 1000; ++i) { add1<<<1, 256, 0, s>>>(x, x, 16); cudaStreamSynchronize(s); }
  printf("launch+sync round trip %.2f us\n", (now() - t0) / 1000 * 1e6);
  std::mutex mu; t0 = now();
  for (int i = 0; i < N; ++i) { std::lock_guard<std::mutex> lk(mu); }
  printf("mutex %.3f us\n", (now() - t0) / N * 1e6);
  t0 = now();
  for (int i = 0; i < N; ++i) { auto p = std::make_shared<std::vector<int>>(8); }
  printf("make_shared+vector %.3f us\n", (now() - t0) / N * 1e6);
  int dev; t0 = now();
  for (int i = 0; i < N; ++i) { cudaGetDevice(&dev); }
  printf("cudaGetDevice %.3f us\n", (now() - t0) / N * 1e6);
  return 0;
}
