// The one interface between the core and the backend of a device type.
//
// The core (eval, streams, events, fences, synchronize, memory, residency
// copies) reaches a backend only through `backend(type)`: the CPU backend
// (backend/cpu) for Device::cpu, the GPU backend for Device::gpu
// (backend/cuda, or backend/no_gpu's stand-in in a build without one).
// Each backend defines its accessor below, cpu_backend() or gpu_backend(),
// returning one object that lives as long as the process; the core calls
// them by name, so the linker keeps each backend's definition even from a
// static library (a self-registering static object could be dropped).
//
// Kernels are not part of it: a primitive's eval_cpu / eval_gpu are its
// own (primitive.h), run by the backend's eval.
#pragma once

#include <cstddef>
#include <memory>

#include "fluxion/allocator.h"
#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/event.h"

namespace fluxion {

class Backend {
 public:
  // ---- Devices -----------------------------------------------------------

  // Whether this backend was compiled in (false only for backend/no_gpu).
  virtual bool built() const = 0;
  // The devices of this type the process can use: 1 cpu; the visible gpus
  // (0 without one).
  virtual int device_count() = 0;
  bool available() { return device_count() > 0; }
  // Properties of device `index` < device_count() (fluxion/device.h).
  virtual DeviceInfo device_info(int index) = 0;
  // The device type whose stream runs the host-side primitives (Load,
  // which reads a file into host memory) asked for on a device of this
  // type: this type where the backend has their kernels, else the CPU's
  // (a GPU backend reads files through the host: Load's 0 in the GPU
  // column of primitive_list.h). ops/io.cpp puts Load's node on that
  // type's default stream when it is not the one asked for.
  virtual Device::DeviceType host_primitive_device() const = 0;

  // ---- Memory ------------------------------------------------------------

  // The allocator of device `index`'s memory, or null when there is none.
  virtual allocator::Allocator* device_allocator(int index) = 0;
  // Where a host copy of this device's buffers is best made (pinned memory
  // for a GPU, which copies fill at the bus's full bandwidth), or null for
  // the host's own allocator.
  virtual allocator::Allocator* host_copy_allocator() = 0;
  // Copy `n` bytes between a device of this type and another device (either
  // direction), blocking until done: Data::ptr_on's residency copies.
  virtual void copy(void* dst, Device dst_device, const void* src,
                    Device src_device, size_t n) = 0;

  // ---- Running -----------------------------------------------------------

  // Schedule `arr`'s primitive on its stream (the backend detaches it:
  // backend/common/node.h).
  virtual void eval(array& arr) = 0;
  // Run `arr`'s kernel now on the calling thread, for the small-op eager
  // path (fluxion/eager.h; its inputs are available). True when it ran:
  // `arr` is then available but keeps its primitive and inputs. False when
  // it did not (the kernel threw, or the backend has no such path): `arr`
  // stays a lazy node for eval. Only the CPU's streams are eager.
  virtual bool eval_now(array& arr) { return false; }
  // Submit the work queued on `s` so far (a GPU batches launches).
  virtual void finalize(Stream s) {}

  // ---- Streams -----------------------------------------------------------

  // Set up a new stream's queue (a CPU stream is a worker thread), end it
  // after what is queued (clear_streams), wait for what is queued so far.
  virtual void new_stream(Stream s) = 0;
  virtual void end_stream(Stream s) = 0;
  virtual void synchronize(Stream s) = 0;
  // The backend's own handle of `s` (a cudaStream_t), for exchanges that
  // name streams (DLPack). Raises where there is none.
  virtual void* native_stream(Stream s) = 0;

  // ---- Events and fences -------------------------------------------------
  //
  // Every event has a host-visible timeline (Event::mark_reached,
  // wait_reached, reached) that the host and the CPU streams wait on:
  // whatever a backend does, each signal must eventually mark it.

  // An object of the backend's to attach to a new event of `s` (null: none).
  virtual std::shared_ptr<void> event_create(Stream s) = 0;
  // On `s`, after the work queued so far: mark `e` reached (with the
  // stream's pending error, if any).
  virtual void event_signal(const Event& e, Stream s) = 0;
  // Work queued on `s` from now on waits until `e` is reached.
  virtual void event_wait(const Event& e, Stream s) = 0;
  // Block the calling thread until `e`, made for a stream of this device
  // type, is reached.
  virtual void event_wait(const Event& e) = 0;
  virtual bool event_is_signaled(const Event& e) = 0;
  // Fences order streams within one eval (the producer's stream updates,
  // the consumer's waits); a backend may use cheaper fences than events.
  virtual void fence_update(const Event& fence, Stream s) = 0;
  virtual void fence_wait(const Event& fence, Stream s) = 0;

 protected:
  // Backends live as long as the process and are never deleted through
  // this interface: a trivial destructor lets one be a constant-initialized
  // global that static destructors can still use.
  ~Backend() = default;
};

// Defined by backend/cpu, and by backend/cuda or backend/no_gpu.
Backend& cpu_backend();
Backend& gpu_backend();

// The backend of a device type: the one place the core chooses.
inline Backend& backend(Device::DeviceType t) {
  return t == Device::gpu ? gpu_backend() : cpu_backend();
}

}  // namespace fluxion
