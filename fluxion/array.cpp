#include "fluxion/array.h"

#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "fluxion/backend_interface.h"
#include "fluxion/dtype_dispatch.h"
#include "fluxion/primitive.h"
#include "fluxion/scheduler.h"
#include "fluxion/transforms.h"

namespace fluxion {

int64_t shape_size(const Shape& shape) {
  int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) {
      throw std::invalid_argument("[array] Negative dimension " +
                                  std::to_string(d) + " in shape.");
    }
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      throw std::overflow_error("[array] Shape size overflows int64.");
    }
    n *= d;
  }
  return n;
}

namespace {
// shape_size, and the bytes fit in int64 too: with a size near 2^62, size *
// itemsize would wrap and allocate a buffer far smaller than the shape
// (found by the fuzzer: ones((2**30, 2**30, 4), int64) + 1 wrote past a
// 0-byte buffer).
int64_t checked_size(const Shape& shape, Dtype t, const Primitive* p) {
  int64_t n = shape_size(shape);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (n > (kMax >> 4) && t.size > 0 && n > kMax / t.size) {
    std::string what = "[array] " + std::to_string(n) + " elements of " +
                       std::to_string(int(t.size)) +
                       " bytes overflow int64 bytes";
    if (p != nullptr) {
      what += " (the output of ";
      what += p->name();
      what += ")";
    }
    what += ".";
    throw std::overflow_error(what);
  }
  return n;
}
}  // namespace

Strides row_major_strides(const Shape& shape) {
  Strides s(shape.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

array::Flags layout_flags(const Shape& shape, const Strides& strides,
                          size_t data_size) {
  size_t size = 1;
  bool row = true, col = true;
  int64_t expect = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    size *= shape[i];
    if (shape[i] != 1) {
      row &= strides[i] == expect;
      expect *= shape[i];
    }
  }
  expect = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1) {
      col &= strides[i] == expect;
      expect *= shape[i];
    }
  }
  array::Flags f;
  f.row_contiguous = row;
  f.col_contiguous = col;
  f.contiguous = row || col || data_size == size;
  return f;
}

array::ArrayDesc::ArrayDesc(Shape s, Dtype t)
    : shape(std::move(s)),
      size(checked_size(shape, t, nullptr)),
      dtype(t),
      status(Status::available) {
  strides = row_major_strides(shape);
}

namespace {
thread_local int t_compile_trace_depth = 0;
}  // namespace

namespace detail {
CompileTraceScope::CompileTraceScope() { ++t_compile_trace_depth; }
CompileTraceScope::~CompileTraceScope() { --t_compile_trace_depth; }
}  // namespace detail

array::ArrayDesc::ArrayDesc(Shape s, Dtype t, std::shared_ptr<Primitive> p,
                            std::vector<array> in)
    : shape(std::move(s)),
      size(checked_size(shape, t, p.get())),
      dtype(t),
      primitive(std::move(p)),
      status(Status::unscheduled),
      in_compile_trace(t_compile_trace_depth > 0),
      inputs(std::move(in)) {
  // A node built from a tracer is a tracer: transformations see through it.
  for (auto& i : inputs) {
    is_tracer |= i.is_tracer();
  }
}

// Destroying a long unevaluated graph recursively would overflow the stack
// (a 100k-deep `x = x + x` is 100k nested destructors). The outermost
// destructor on a thread drains a thread-local list; a destructor that runs
// while one is draining (a node freed by the drain, or an array held by a
// freed primitive) only moves its inputs and siblings onto the list. So the
// depth stays bounded whatever the graph's shape: shared inputs, inputs
// used twice by one node, and sibling groups (whose cycle `~array` breaks
// when the drain drops the last outside handle) included.
namespace {
thread_local std::vector<array>* t_release_list = nullptr;
}  // namespace

array::ArrayDesc::~ArrayDesc() {
  if (inputs.empty() && siblings.empty()) {
    return;
  }
  // Only a node held by nothing else dies when dropped: those are deferred
  // (no allocation otherwise, e.g. for graphs whose inputs are still in
  // use); any other handle is dropped here, which only decrements (or, for
  // the last outside handle of a sibling group, breaks its cycle in ~array,
  // whose freed siblings then defer their own inputs).
  auto defer = [](std::vector<array>& from, std::vector<array>& to) {
    for (auto& a : from) {
      if (a.desc_ && a.desc_.use_count() == 1) {
        to.push_back(std::move(a));
      } else {
        array dropped = std::move(a);
      }
    }
  };
  if (t_release_list != nullptr) {
    defer(inputs, *t_release_list);
    defer(siblings, *t_release_list);
    return;
  }
  std::vector<array> list;
  t_release_list = &list;
  defer(inputs, list);
  defer(siblings, list);
  while (!list.empty()) {
    // Dropped here; whatever this frees defers onto `list`.
    array a = std::move(list.back());
    list.pop_back();
  }
  t_release_list = nullptr;
}

array::array(void* ptr, Shape shape, Dtype dtype, Data::Deleter deleter,
             Device device)
    : desc_(detail::make_small_shared<ArrayDesc>(std::move(shape), dtype)) {
  desc_->data = detail::make_small_shared<Data>(ptr, nbytes(),
                                                std::move(deleter), device);
  desc_->data_ptr = ptr;
  desc_->data_size = size();
}

array::array(Shape shape, Dtype dtype, std::shared_ptr<Primitive> primitive,
             std::vector<array> inputs)
    : desc_(detail::make_small_shared<ArrayDesc>(
          std::move(shape), dtype, std::move(primitive), std::move(inputs))) {}

std::vector<array> array::make_arrays(std::vector<Shape> shapes,
                                      const std::vector<Dtype>& dtypes,
                                      const std::shared_ptr<Primitive>& p,
                                      const std::vector<array>& inputs) {
  std::vector<array> outs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    outs.emplace_back(std::move(shapes[i]), dtypes[i], p, inputs);
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    std::vector<array> sibs;
    for (size_t j = 0; j < outs.size(); ++j) {
      if (j != i) {
        sibs.push_back(outs[j]);
      }
    }
    outs[i].set_siblings(std::move(sibs), static_cast<uint32_t>(i));
  }
  return outs;
}

array& array::operator=(const array& o) & {
  if (desc_ != o.desc_) {
    array old(std::move(*this));
    desc_ = o.desc_;
  }
  return *this;
}

array& array::operator=(array&& o) & {
  if (desc_ != o.desc_) {
    array old(std::move(*this));
    desc_ = std::move(o.desc_);
  }
  return *this;
}

// Siblings reference each other, so a group would never be freed: when the
// last outside handle of a group goes, break the cycle. Every list of the
// group is moved out before any handle in them is dropped (here and in
// detach): a handle dropped inside a list's clear() would run this
// destructor on a half-cleared group and could free a sibling whose list
// is being cleared.
array::~array() {
  if (!desc_ || desc_->siblings.empty()) {
    return;
  }
  long n = static_cast<long>(desc_->siblings.size());
  if (desc_.use_count() != n + 1) {
    return;
  }
  for (auto& s : desc_->siblings) {
    if (s.desc_.use_count() != n) {
      return;
    }
  }
  auto sibs = std::move(desc_->siblings);
  std::vector<std::vector<array>> lists;
  lists.reserve(sibs.size());
  for (auto& s : sibs) {
    lists.emplace_back(std::move(s.desc_->siblings));
  }
}  // lists, then sibs, dropped: every list of the group is empty by now

int array::shape(int dim) const {
  int n = ndim();
  if (dim < -n || dim >= n) {
    throw std::out_of_range("[array::shape] Axis " + std::to_string(dim) +
                            " is out of bounds for array with " +
                            std::to_string(n) + " dimensions.");
  }
  return desc_->shape[dim < 0 ? dim + n : dim];
}

int64_t array::strides(int dim) const {
  int n = ndim();
  if (dim < -n || dim >= n) {
    throw std::out_of_range("[array::strides] Axis " + std::to_string(dim) +
                            " is out of bounds for array with " +
                            std::to_string(n) + " dimensions.");
  }
  return desc_->strides[dim < 0 ? dim + n : dim];
}

std::vector<array> array::outputs() const {
  std::vector<array> outs;
  outs.reserve(siblings().size() + 1);
  auto& sibs = siblings();
  for (uint32_t i = 0, j = 0; i <= sibs.size(); ++i) {
    if (i == desc_->position) {
      outs.push_back(*this);
    } else {
      outs.push_back(sibs[j++]);
    }
  }
  return outs;
}

void array::detach() {
  // Only lists that hold something are written: a stream's worker may be
  // dropping its handles to this node (reading the lists in ~array) now.
  if (desc_->siblings.empty()) {
    desc_->inputs.clear();
    desc_->position = 0;
    desc_->primitive = nullptr;
    return;
  }
  // The lists are moved out and dropped last, as in ~array.
  auto sibs = std::move(desc_->siblings);
  std::vector<std::vector<array>> dropped;
  dropped.reserve(2 * sibs.size() + 1);
  dropped.emplace_back(std::move(desc_->inputs));
  for (auto& s : sibs) {
    dropped.emplace_back(std::move(s.desc_->inputs));
    dropped.emplace_back(std::move(s.desc_->siblings));
    s.desc_->primitive = nullptr;
    s.desc_->position = 0;
  }
  desc_->position = 0;
  desc_->primitive = nullptr;
}

void array::eval() { fluxion::eval({*this}); }

namespace {
// Held for a few instructions (a shared_ptr copy or swap): spinning is
// cheaper than a mutex per array.
struct EventGuard {
  std::atomic_flag& f;
  explicit EventGuard(std::atomic_flag& flag) : f(flag) {
    while (f.test_and_set(std::memory_order_acquire)) {
      std::this_thread::yield();
    }
  }
  ~EventGuard() { f.clear(std::memory_order_release); }
};
}  // namespace

Event array::event() const {
  EventGuard g(desc_->event_lock);
  return desc_->event;
}

void array::attach_event(Event e) const {
  Event old;
  {
    EventGuard g(desc_->event_lock);
    old = std::exchange(desc_->event, std::move(e));
  }
  // `old` (maybe the last handle of an event) is released unlocked.
}

bool array::is_tracer() const {
  return (desc_->is_tracer && in_tracing()) || retain_graph();
}

bool array::is_available() const {
  if (status() == Status::available) {
    return true;
  }
  if (status() != Status::evaluated) {
    return false;
  }
  Event e = event();
  if (e.valid() && e.is_signaled() && !desc_->error) {
    set_status(Status::available);
    return true;
  }
  return false;
}

void array::wait() {
  if (status() != Status::available) {
    if (status() == Status::unscheduled) {
      eval();
    }
    Event e = event();
    if (e.valid()) {
      // The event carries the first pending error of its stream's work,
      // which may be another array's (another thread's, on a shared
      // stream): this one only fails if its own kernel (or one upstream)
      // did, and then with its own error.
      e.wait_quietly();
    }
    // A failed array never becomes available (its data is a placeholder):
    // every later wait, and so every read, raises its error again.
    if (!desc_->error) {
      if (e.valid()) {
        detach_event();
      }
      set_status(Status::available);
    }
  }
  if (desc_->error) {
    scheduler::clear_error(desc_->error);
    std::rethrow_exception(desc_->error);
  }
}

void* Data::ptr_on(Device d) {
  if (d == device_) {
    return ptr_;
  }
  if (void* c = copy_.load(std::memory_order_acquire)) {
    if (copy_device_ == d) {
      return c;
    }
  }
  // Rare (once per buffer and device): one lock for all buffers.
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  if (void* c = copy_.load(std::memory_order_relaxed)) {
    if (copy_device_ == d) {
      return c;
    }
    throw std::runtime_error(
        "[residency] A buffer can have a copy on one other device only.");
  }
  // A host copy goes to pinned memory when it can be had, else to the
  // host's (pinned memory is limited by the system).
  Backend& home = backend(device_.type);
  allocator::Allocator* a =
      d.type == Device::cpu ? home.host_copy_allocator() : nullptr;
  void* c = nullptr;
  if (a != nullptr) {
    try {
      c = a->malloc(nbytes_);
    } catch (const std::runtime_error&) {
    }
  }
  if (c == nullptr) {
    a = &allocator::get(d, "malloc");
    c = a->malloc(nbytes_);
  }
  try {
    home.copy(c, d, ptr_, device_, nbytes_);
  } catch (...) {
    a->free(c, nbytes_);
    throw;
  }
  copy_allocator_ = a;
  copy_device_ = d;
  copy_.store(c, std::memory_order_release);
  return c;
}

void* array::data_on(Device d) const {
  if (!desc_->data) {
    return desc_->data_ptr;
  }
  Data& data = *desc_->data;
  auto offset = static_cast<char*>(desc_->data_ptr) -
                static_cast<char*>(data.ptr());
  return static_cast<char*>(data.ptr_on(d)) + offset;
}

void array::set_data(size_t nbytes, Device device) {
  desc_->data = detail::make_small_shared<Data>(nbytes, device);
  desc_->data_ptr = desc_->data->ptr();
  desc_->data_size = size();
  desc_->strides = row_major_strides(desc_->shape);
  desc_->flags = Flags{true, true, true};
}

void array::set_data(std::shared_ptr<Data> data, size_t data_size,
                     Strides strides, Flags flags, int64_t offset) {
  desc_->data = std::move(data);
  // A null buffer: the value dropped (a computed node made lazy again).
  desc_->data_ptr =
      desc_->data ? static_cast<char*>(desc_->data->ptr()) + offset * itemsize()
                  : nullptr;
  desc_->data_size = data_size;
  desc_->strides = std::move(strides);
  desc_->flags = flags;
}

void array::copy_shared_buffer(const array& other, Strides strides,
                               Flags flags, size_t data_size, int64_t offset) {
  desc_->data = other.desc_->data;
  desc_->data_ptr =
      static_cast<char*>(other.desc_->data_ptr) + offset * itemsize();
  desc_->data_size = data_size;
  desc_->strides = std::move(strides);
  desc_->flags = flags;
}

void array::copy_shared_buffer(const array& other) {
  copy_shared_buffer(other, other.strides(), other.flags(), other.data_size());
}

void array::move_shared_buffer(array other) {
  desc_->data = std::move(other.desc_->data);
  desc_->data_ptr = other.desc_->data_ptr;
  desc_->data_size = other.desc_->data_size;
  desc_->strides = other.desc_->strides;
  desc_->flags = other.desc_->flags;
}

void array::init_from(const void* src, Dtype src_dtype) {
  set_data(nbytes());
  convert_elements(src, src_dtype, desc_->data_ptr, dtype(), size());
}

void convert_elements(const void* src, Dtype src_dtype, void* dst,
                      Dtype dst_dtype, size_t n) {
  dispatch_all(src_dtype, [&](auto in_tag) {
    using In = typename decltype(in_tag)::type;
    dispatch_all(dst_dtype, [&](auto out_tag) {
      using Out = typename decltype(out_tag)::type;
      auto* s = static_cast<const In*>(src);
      auto* d = static_cast<Out*>(dst);
      for (size_t i = 0; i < n; ++i) {
        d[i] = cast_value<Out>(s[i]);
      }
    });
  });
}

}  // namespace fluxion
