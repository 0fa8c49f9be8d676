// A move-only `void()` callable that stores captures up to 120 bytes inline:
// scheduling a kernel must not cost a heap allocation per task (a
// std::function with an array-holding capture always allocates).
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace fluxion {

class SmallFunction {
 public:
  SmallFunction() = default;
  SmallFunction(std::nullptr_t) {}

  template <typename F, typename = std::enable_if_t<!std::is_same_v<
                            std::decay_t<F>, SmallFunction>>>
  SmallFunction(F&& f) {
    using D = std::decay_t<F>;
    if constexpr (sizeof(D) <= kInline &&
                  alignof(D) <= alignof(std::max_align_t)) {
      new (buf_) D(std::forward<F>(f));
      ops_ = &inline_ops<D>;
    } else {
      *reinterpret_cast<D**>(buf_) = new D(std::forward<F>(f));
      ops_ = &heap_ops<D>;
    }
  }

  SmallFunction(SmallFunction&& o) noexcept : ops_(o.ops_) {
    if (ops_) {
      ops_->move(o.buf_, buf_);
      o.ops_ = nullptr;
    }
  }
  SmallFunction& operator=(SmallFunction&& o) noexcept {
    if (this != &o) {
      reset();
      ops_ = o.ops_;
      if (ops_) {
        ops_->move(o.buf_, buf_);
        o.ops_ = nullptr;
      }
    }
    return *this;
  }
  SmallFunction& operator=(std::nullptr_t) {
    reset();
    return *this;
  }
  SmallFunction(const SmallFunction&) = delete;
  SmallFunction& operator=(const SmallFunction&) = delete;
  ~SmallFunction() { reset(); }

  void operator()() { ops_->call(buf_); }
  explicit operator bool() const { return ops_ != nullptr; }

 private:
  static constexpr size_t kInline = 120;
  struct Ops {
    void (*call)(void*);
    void (*move)(void* from, void* to);  // leaves `from` destroyed
    void (*destroy)(void*);
  };
  template <typename D>
  static constexpr Ops inline_ops = {
      [](void* p) { (*static_cast<D*>(p))(); },
      [](void* from, void* to) {
        new (to) D(std::move(*static_cast<D*>(from)));
        static_cast<D*>(from)->~D();
      },
      [](void* p) { static_cast<D*>(p)->~D(); }};
  template <typename D>
  static constexpr Ops heap_ops = {
      [](void* p) { (**static_cast<D**>(p))(); },
      [](void* from, void* to) {
        *static_cast<D**>(to) = *static_cast<D**>(from);
      },
      [](void* p) { delete *static_cast<D**>(p); }};

  void reset() {
    if (ops_) {
      ops_->destroy(buf_);
      ops_ = nullptr;
    }
  }

  alignas(std::max_align_t) unsigned char buf_[kInline];
  const Ops* ops_ = nullptr;
};

}  // namespace fluxion
