// The lazy array: a cheap handle to a node of the computation graph.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <exception>
#include <memory>
#include <stdexcept>
#include <vector>

#include "fluxion/allocator.h"
#include "fluxion/dtype.h"
#include "fluxion/event.h"
#include "fluxion/small_block.h"

namespace fluxion {

// Every node carries a shape and strides: their buffers come from the
// per-thread cache of small blocks (small_block.h), as the node itself
// does, since a chain of small ops frees them together at eval, past
// malloc's per-thread cache (`y * x` on 16 elements: 1.25x -> 1.17x
// NumPy's time, bench.py --dispatch). A std::vector<int> converts with
// `Shape(v.begin(), v.end())`.
using Shape = std::vector<int32_t, detail::SmallBlockAllocator<int32_t>>;
using Strides = std::vector<int64_t, detail::SmallBlockAllocator<int64_t>>;

class Primitive;
class array;

// Owns a block of memory on its home device: from that device's allocator,
// or an external buffer released by a user-supplied deleter. Views share one
// Data.
//
// Residency (docs/architecture.md, "Residency"): a block used on the other
// device (a GPU result read by a CPU kernel, item() or NumPy; a host array
// read by a GPU kernel) gets one copy there, made on first use
// (`ptr_on`), kept with the block and freed with it. Copies are only ever
// read: kernels write fresh blocks, or donated ones, and
// array::is_donatable refuses a block that lives on another device, has
// a copy or is borrowed, so no stale copy can survive an in-place update
// and no kernel writes memory another library shares with us.
class Data {
 public:
  using Deleter = std::function<void(void*)>;
  explicit Data(size_t nbytes, Device device = Device::cpu)
      : allocator_(&allocator::get(device, "malloc")),
        ptr_(allocator_->malloc(nbytes)),
        nbytes_(nbytes),
        device_(device) {}
  Data(void* ptr, size_t nbytes, Deleter deleter,
       Device device = Device::cpu)
      : allocator_(nullptr),
        ptr_(ptr),
        nbytes_(nbytes),
        device_(device),
        deleter_(std::move(deleter)) {}
  ~Data() {
    if (void* c = copy_.load(std::memory_order_acquire)) {
      copy_allocator_->free(c, nbytes_);
    }
    if (deleter_) {
      deleter_(ptr_);
    } else if (allocator_ != nullptr) {
      allocator_->free(ptr_, nbytes_);
    }
  }
  Data(const Data&) = delete;
  Data& operator=(const Data&) = delete;
  void* ptr() const { return ptr_; }
  size_t nbytes() const { return nbytes_; }
  // The device whose memory holds the block.
  Device device() const { return device_; }
  // The block in `d`'s memory: ptr() on the home device, else its copy
  // there, made now (a blocking copy, after the block's producer has
  // finished: callers wait on the array's event first) when there is none.
  void* ptr_on(Device d);
  bool has_copy() const {
    return copy_.load(std::memory_order_acquire) != nullptr;
  }
  // A borrowed block is another library's memory shared without a copy (a
  // DLPack or buffer-protocol import): the producer still reads and writes
  // it, so no kernel may take it over as its output (is_donatable).
  void mark_borrowed() { borrowed_ = true; }
  bool borrowed() const { return borrowed_; }

 private:
  std::atomic<void*> copy_{nullptr};
  Device copy_device_{Device::cpu};
  allocator::Allocator* copy_allocator_ = nullptr;
  allocator::Allocator* allocator_;  // null for an external buffer
  void* ptr_;
  size_t nbytes_;
  Device device_;
  Deleter deleter_;
  bool borrowed_ = false;
};

int64_t shape_size(const Shape& shape);  // checks for overflow

class array {
 public:
  enum class Status {
    unscheduled,  // a graph node, not yet handed to eval
    evaluated,    // scheduled: its data will be ready when its event is
    available,    // data ready to read
  };

  struct Flags {
    // Elements fill `data_size` consecutive slots (any order).
    bool contiguous : 1;
    bool row_contiguous : 1;
    bool col_contiguous : 1;
  };

  // Scalars.
  template <HasDtype T>
  explicit array(T val, Dtype dtype = dtype_of<T>);

  // 1-D from a list; shaped from a list or an iterator.
  template <typename T>
  array(std::initializer_list<T> data, Dtype dtype = dtype_of<T>);
  template <typename T>
  array(std::initializer_list<T> data, Shape shape, Dtype dtype = dtype_of<T>);
  template <typename It>
  array(It data, Shape shape,
        Dtype dtype = dtype_of<typename std::iterator_traits<It>::value_type>);
  // Exactly `shape_size(shape)` elements of `dtype` at `ptr` in `device`'s
  // memory, owned from now on and released with `deleter`.
  array(void* ptr, Shape shape, Dtype dtype, Data::Deleter deleter,
        Device device = Device::cpu);

  // A graph node produced by `primitive` from `inputs`.
  array(Shape shape, Dtype dtype, std::shared_ptr<Primitive> primitive,
        std::vector<array> inputs);
  // The outputs of one multi-output primitive; they become siblings.
  static std::vector<array> make_arrays(std::vector<Shape> shapes,
                                        const std::vector<Dtype>& dtypes,
                                        const std::shared_ptr<Primitive>& p,
                                        const std::vector<array>& inputs);

  array(const array&) = default;
  array(array&&) = default;
  array& operator=(const array&) &;
  array& operator=(array&&) &;
  ~array();

  // A handle made with `new` (the Python binding holds each array so, one
  // per result) comes from the small-block cache, as nodes do.
  static void* operator new(size_t bytes) {
    return detail::small_block_alloc(bytes);
  }
  static void operator delete(void* p, size_t bytes) noexcept {
    detail::small_block_free(p, bytes);
  }

  // Metadata.
  Dtype dtype() const { return desc_->dtype; }
  const Shape& shape() const { return desc_->shape; }
  int shape(int dim) const;
  int ndim() const { return static_cast<int>(desc_->shape.size()); }
  size_t size() const { return desc_->size; }
  size_t itemsize() const { return dtype().size; }
  size_t nbytes() const { return size() * itemsize(); }
  const Strides& strides() const { return desc_->strides; }
  int64_t strides(int dim) const;
  Flags flags() const { return desc_->flags; }
  size_t data_size() const { return desc_->data_size; }
  uintptr_t id() const { return reinterpret_cast<uintptr_t>(desc_.get()); }
  // Number of handles sharing this node (for donation checks).
  long use_count() const { return desc_.use_count(); }

  // Evaluate (if needed) and read the single element as T.
  template <typename T>
  T item();
  template <typename T>
  T item() const;

  // Raw data in host memory; valid once the array is available. A buffer
  // whose home is a GPU is copied to the host on first use (Data::ptr_on),
  // so CPU kernels, item(), NumPy and save read GPU results unchanged.
  template <typename T>
  T* data() {
    return static_cast<T*>(raw_data());
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(raw_data());
  }
  void* raw_data() const {
    const Data* d = desc_->data.get();
    if (d == nullptr || d->device().type == Device::cpu) {
      return desc_->data_ptr;
    }
    return data_on(Device::cpu);
  }
  // For backends: this array's data in `d`'s memory (the home buffer, or
  // its copy on `d`, made now when missing).
  void* data_on(Device d) const;
  // The device whose memory holds the buffer (cpu when there is none).
  Device home_device() const {
    return desc_->data ? desc_->data->device() : Device(Device::cpu);
  }

  // Evaluation.
  void eval();
  void wait();  // block until the data is ready
  // Status and event may be read and changed by several threads at once
  // (two threads waiting on, or evaluating, one shared array): the status
  // is atomic and the event is copied out under a lock, so that one
  // thread's detach never frees the event another thread is waiting on.
  Status status() const { return desc_->status.load(); }
  void set_status(Status s) const { desc_->status.store(s); }
  bool is_available() const;
  Event event() const;
  void attach_event(Event e) const;
  void detach_event() const { attach_event(Event{}); }
  // The error of the kernel that should have produced this array (or of
  // one upstream): its outputs hold zeros, consumers' kernels are skipped
  // and rethrow it through their stream, and waiting on it rethrows it.
  const std::exception_ptr& error() const { return desc_->error; }
  void set_error(std::exception_ptr e) const { desc_->error = std::move(e); }

  // Graph.
  bool has_primitive() const { return desc_->primitive != nullptr; }
  Primitive& primitive() const { return *desc_->primitive; }
  const std::shared_ptr<Primitive>& primitive_ptr() const {
    return desc_->primitive;
  }
  std::vector<array>& inputs() { return desc_->inputs; }
  const std::vector<array>& inputs() const { return desc_->inputs; }
  const std::vector<array>& siblings() const { return desc_->siblings; }
  std::vector<array>& siblings() { return desc_->siblings; }
  uint32_t sibling_position() const { return desc_->position; }
  void set_siblings(std::vector<array> siblings, uint32_t position) {
    desc_->siblings = std::move(siblings);
    desc_->position = position;
  }
  // Computed when built by the small-op path (fluxion/eager.h) and still a
  // graph node: available, with its primitive and inputs, and no tracer.
  // To whatever reads the graph it is unevaluated (MLX's lazy node) until
  // an eval detaches it; kernels and reads use its data.
  bool is_computed_node() const {
    return has_primitive() && status() == Status::available && !is_tracer();
  }
  // This array and its siblings, in output order.
  std::vector<array> outputs() const;
  // Drop the primitive and inputs (after evaluation) so memory can be freed.
  void detach();
  // Move the inputs out (the worker takes them when the node is detached).
  std::vector<array> take_inputs() { return std::move(desc_->inputs); }

  // A tracer only while a transformation traces (or its rules run): outside
  // of them every array behaves as a plain value.
  bool is_tracer() const;
  void set_tracer(bool t) { desc_->is_tracer = t; }
  // Whether this node was built while `compile` traced a function on this
  // thread (compile tells the function's own nodes from arrays it closes
  // over).
  bool built_in_compile_trace() const { return desc_->in_compile_trace; }

  // Buffer management, for kernels.
  const std::shared_ptr<Data>& data_shared_ptr() const { return desc_->data; }
  // Fresh row-contiguous storage for this array.
  // Fresh row-major memory of `nbytes` on `device` (kernels pass their
  // backend's device).
  void set_data(size_t nbytes, Device device = Device::cpu);
  void set_data(std::shared_ptr<Data> data, size_t data_size, Strides strides,
                Flags flags, int64_t offset_elems = 0);
  // Make this array a view of `other`'s buffer.
  void copy_shared_buffer(const array& other, Strides strides,
                          Flags flags, size_t data_size, int64_t offset = 0);
  void copy_shared_buffer(const array& other);
  // Take over `other`'s buffer (donation): same layout as `other`.
  void move_shared_buffer(array other);
  // True when no one else can see this array's buffer, so an op may write
  // its output into it.
  // `d` is the device of the kernel that would write it: the buffer must
  // live there and have no copy elsewhere (Data's residency rule).
  // `stream_holds` counts owners of the buffer that the caller knows to be
  // harmless: the GPU stream's own list of buffers its queued kernels use,
  // which a later kernel on that stream runs after (stream order).
  bool is_donatable(Device d = Device::cpu, long stream_holds = 0) const {
    return desc_.use_count() == 1 && desc_->data != nullptr &&
           desc_->data.use_count() == 1 + stream_holds &&
           desc_->flags.row_contiguous &&
           desc_->data_size == desc_->size && desc_->data->device() == d &&
           !desc_->data->has_copy() && !desc_->data->borrowed();
  }

  // Indexing sugar is in ops; arrays compare by identity here.
  bool is_same(const array& o) const { return desc_ == o.desc_; }

 private:
  struct ArrayDesc {
    Shape shape;
    Strides strides;
    size_t size = 1;
    Dtype dtype;
    std::shared_ptr<Primitive> primitive;
    std::atomic<Status> status;
    mutable std::atomic_flag event_lock = ATOMIC_FLAG_INIT;
    Event event;
    std::exception_ptr error;
    bool is_tracer = false;
    bool in_compile_trace = false;
    uint32_t position = 0;
    std::shared_ptr<Data> data;
    void* data_ptr = nullptr;
    size_t data_size = 0;
    Flags flags{true, true, true};
    std::vector<array> inputs;
    std::vector<array> siblings;

    ArrayDesc(Shape shape, Dtype dtype);
    ArrayDesc(Shape shape, Dtype dtype, std::shared_ptr<Primitive> p,
              std::vector<array> inputs);
    ~ArrayDesc();
  };

  explicit array(std::shared_ptr<ArrayDesc> d) : desc_(std::move(d)) {}
  void init_from(const void* src, Dtype src_dtype);
  template <typename It>
  void init(It begin);

  std::shared_ptr<ArrayDesc> desc_;
};

// Row-major strides for `shape`.
Strides row_major_strides(const Shape& shape);
// Flags of a layout with the given shape and strides.
array::Flags layout_flags(const Shape& shape, const Strides& strides,
                          size_t data_size);

// Copy/convert `n` elements of type `src_dtype` at `src` into `dst` of type
// `dst_dtype` (used to build arrays from host data).
void convert_elements(const void* src, Dtype src_dtype, void* dst,
                      Dtype dst_dtype, size_t n);

template <HasDtype T>
array::array(T val, Dtype dtype)
    : desc_(detail::make_small_shared<ArrayDesc>(Shape{}, dtype)) {
  init_from(&val, dtype_of<T>);
}

template <typename T>
array::array(std::initializer_list<T> data, Dtype dtype)
    : desc_(detail::make_small_shared<ArrayDesc>(
          Shape{static_cast<int32_t>(data.size())}, dtype)) {
  init(data.begin());
}

template <typename T>
array::array(std::initializer_list<T> data, Shape shape, Dtype dtype)
    : desc_(detail::make_small_shared<ArrayDesc>(std::move(shape), dtype)) {
  if (data.size() != size()) {
    throw std::invalid_argument(
        "[array] Data size (" + std::to_string(data.size()) +
        ") does not match the size of the shape (" + std::to_string(size()) +
        ").");
  }
  init(data.begin());
}

template <typename It>
array::array(It data, Shape shape, Dtype dtype)
    : desc_(detail::make_small_shared<ArrayDesc>(std::move(shape), dtype)) {
  init(data);
}

template <typename It>
void array::init(It begin) {
  using T = typename std::iterator_traits<It>::value_type;
  std::vector<T> tmp(size());
  std::copy_n(begin, size(), tmp.begin());
  init_from(tmp.data(), dtype_of<T>);
}

template <>
inline void array::init<const bool*>(const bool* begin) {
  init_from(begin, bool_);
}

template <typename T>
T array::item() {
  if (size() != 1) {
    throw std::invalid_argument(
        "[item] Only one-element arrays can be converted to scalars; got an "
        "array of size " +
        std::to_string(size()) + ".");
  }
  eval();
  T out;
  convert_elements(raw_data(), dtype(), &out, dtype_of<T>, 1);
  return out;
}

template <typename T>
T array::item() const {
  return const_cast<array*>(this)->item<T>();
}

namespace detail {
// Marks the nodes built on this thread while it lives (compile's tracing).
class CompileTraceScope {
 public:
  CompileTraceScope();
  ~CompileTraceScope();
  CompileTraceScope(const CompileTraceScope&) = delete;
  CompileTraceScope& operator=(const CompileTraceScope&) = delete;
};
}  // namespace detail

}  // namespace fluxion
