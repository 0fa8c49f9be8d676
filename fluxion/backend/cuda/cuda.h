// The CUDA backend's internal interface, shared by its host files (*.cpp:
// runtime, allocator, cuBLASLt) and its kernels (*.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"

namespace fluxion::cu {

// Every failed CUDA call becomes a C++ exception naming the operation and
// the CUDA error (never an abort). A sticky error (a kernel fault) leaves
// the context unusable, which CUDA gives no way to repair; every other one
// (an allocation, a bad launch configuration) is cleared here, so the
// process keeps working.
[[noreturn]] void throw_error(const char* op, cudaError_t err);
inline void check(cudaError_t err, const char* op) {
  if (err != cudaSuccess) {
    throw_error(op, err);
  }
}
// After a kernel launch: a launch error (bad configuration, no kernel image
// for this GPU) surfaces here, naming the primitive.
void check_launch(const char* op);

// The CUDA stream of a Fluxion GPU stream (made by gpu::new_stream).
cudaStream_t stream_of(Stream s);
// The stream of the primitive being evaluated on this thread (set by
// gpu::eval around eval_gpu), so kernels need not pass it around.
cudaStream_t current_stream();

// Device memory of the kernel's outputs and inputs. `alloc` gives `out`
// fresh row-contiguous memory on the GPU; `in_ptr` reads an input where
// the kernel runs (uploading a host buffer once: Data::ptr_on).
void alloc(array& out);
template <typename T = void>
inline T* ptr(const array& a) {
  return static_cast<T*>(a.data_on(Device{Device::gpu}));
}

// Output allocation like `like` (same strides over its data_size
// elements), donating like's buffer when it can (`donatable` below, and
// the same element size).
void alloc_like(const array& like, array& out, bool may_donate);

// Up to this many dimensions take the general strided kernels (after
// collapsing); more raise.
constexpr int kMaxDims = 10;

// Shape and strides (in elements), by value into a kernel.
struct Layout {
  int ndim = 0;
  int64_t shape[kMaxDims];
  int64_t strides[3][kMaxDims];  // up to three operands
};

// Collapse `shape` with the strides of `arrays` into a Layout (contiguous
// runs merged, size-1 dims dropped); raises past kMaxDims.
Layout collapse(const Shape& shape, const std::vector<Strides>& strides,
                const char* op);

// Threads per block and blocks for `n` elementwise items.
constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n, int per_thread = 1) {
  int64_t b = (n + int64_t(kThreads) * per_thread - 1) /
              (int64_t(kThreads) * per_thread);
  return static_cast<unsigned>(b < 1 ? 1 : (b > 1 << 30 ? 1 << 30 : b));
}

// Makes `out` a row-contiguous copy of `in` on the GPU (any layout, any
// dtype; the views' fallback and the copy of donated-refused inputs).
void copy_general(const array& in, array& out);
// Casting copy of `in` into `out` (already allocated, row-contiguous).
void copy_cast(const array& in, array& out);
// Casting copy of `in` (any layout, broadcast included) into `out`, whose
// row-contiguous GPU memory is already allocated.
void copy_into(const array& in, array& out);
// Copy `src` (any strides, stride 0 included), from element `src_offset`
// of its buffer, into `dst`'s buffer laid out with `dst_strides` from
// element `dst_offset`, converting the dtype; `shape` is the region's
// shape (the CPU's cpu::copy_region).
void copy_region(const array& src, const Strides& src_strides,
                 int64_t src_offset, array& dst, const Strides& dst_strides,
                 int64_t dst_offset, const Shape& shape);
// Every element of `out`'s buffer <- value's first element (same dtype).
void fill(const array& value, array& out);
// A row-contiguous version of `a` on the GPU (itself when it is one).
array contiguous(const array& a);

// FLUXION_ENABLE_TF32=1 (read once): float32 products and convolutions
// may use TF32 tensor cores (MLX's convention); otherwise they compute in
// float32.
bool tf32_enabled();

// out = a @ b through cuBLASLt, into out's row-contiguous GPU memory
// (already allocated): a and b are views with out's batch dims (stride 0
// where broadcast) and any row/column-major last two dims. For kernels
// that multiply a temporary (the dequantized matrix of QuantizedMatmul).
// `out` may also be a view of such memory whose last dim has stride 1 and
// whose rows are at least that dim's size apart (a convolution writes each
// group's columns of its output so).
void matmul_into(const array& a, const array& b, array& out);

// Out-of-range indices. A kernel cannot raise, and checking indices on the
// host would cost a synchronization per gather; instead an index kernel
// reports the first bad index it meets into a fault slot (pinned host
// memory the device writes), and the stream's next host mark (the
// event_signal that eval ends with) reads the slot after the kernel has
// run. A fault sets its error, `[op] Index 5 is out of bounds for axis 0
// with size 3.`, on the kernel's outputs and on every GPU array computed
// from them since, so reading any of them raises, as on the CPU.
struct IndexFault {
  int flag;  // 0 until a thread claims the slot
  int axis;
  int is_unsigned;
  long long value, n, size;
};
// A fresh slot for the index kernel being launched by this thread's
// gpu::eval, reported as `op`'s error.
IndexFault* index_fault(const char* op);

// An error found by the host after a kernel was launched (NCCL's
// watchdog: a collective timed out, or a peer failed). The slot is taken
// like an index kernel's while the kernel launches (on the thread of
// gpu::eval); `report_fault` from any thread, before the stream's next host
// mark runs, sets the error on the kernel's outputs and their dependents,
// as an index fault does. A report after that mark (the kernel had
// completed and was checked) is ignored.
struct HostFault {
  void* faults = nullptr;
  int slot = -1;
  uint64_t generation = 0;
};
HostFault host_fault(const char* op);
void report_fault(const HostFault& f, std::exception_ptr e);

// A failure a library reports per matrix in device memory (cuSOLVER's and
// cuBLAS's info arrays: > 0 a singular or not positive definite matrix,
// or no convergence; < 0 a rejected argument). Reading the array on the
// host would cost a synchronization per call: a kernel folds it into the
// slot this returns instead (report_status in kernels.cuh: `value` the
// first nonzero info), and the stream's next host mark raises, as the
// CPU's LAPACK kernels do, std::runtime_error("[op] " + failure) for a
// positive value and "[op] The solver rejected argument N." for a
// negative one, on the kernel's outputs and their dependents as an index
// fault. `op` and `failure` are string literals (kept, not copied).
IndexFault* status_fault(const char* op, const char* failure);

// Keep `a`'s buffer alive until the work queued so far on the current
// stream has finished (temporaries of a kernel).
void keep_alive(const array& a);
void keep_alive(std::shared_ptr<Data> d);

// array::is_donatable for a kernel about to run on the current stream: the
// holds of that stream's own kept buffers (above) do not prevent donation.
bool donatable(const array& a);

}  // namespace fluxion::cu
