// A small open-addressing hash map from array ids to ints, for eval's
// per-node bookkeeping: no allocation per entry, unlike std::unordered_map.
#pragma once

#include <cstdint>
#include <vector>

namespace fluxion::detail {

class IdCountMap {
 public:
  IdCountMap() : slots_(64) {}

  // Pointer to the value for `id`, or null.
  int* find(uintptr_t id) {
    size_t i = index(id);
    while (slots_[i].id != 0) {
      if (slots_[i].id == id) {
        return slots_[i].live ? &slots_[i].value : nullptr;
      }
      i = (i + 1) & (slots_.size() - 1);
    }
    return nullptr;
  }

  // Insert `id` with `value` if absent; returns the stored value's address.
  int* insert(uintptr_t id, int value) {
    if ((used_ + 1) * 2 > slots_.size()) {
      grow();
    }
    size_t i = index(id);
    while (slots_[i].id != 0) {
      if (slots_[i].id == id) {
        if (!slots_[i].live) {
          slots_[i].live = true;
          slots_[i].value = value;
          ++size_;
        }
        return &slots_[i].value;
      }
      i = (i + 1) & (slots_.size() - 1);
    }
    slots_[i] = Slot{id, value, true};
    ++used_;
    ++size_;
    return &slots_[i].value;
  }

  int& operator[](uintptr_t id) { return *insert(id, 0); }

  // Erasure leaves a tombstone so probe chains stay intact.
  void erase(uintptr_t id) {
    if (int* v = find(id)) {
      reinterpret_cast<Slot*>(reinterpret_cast<char*>(v) -
                              offsetof(Slot, value))
          ->live = false;
      --size_;
    }
  }

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uintptr_t id = 0;
    int value = 0;
    bool live = false;
  };

  size_t index(uintptr_t id) const {
    // Descriptors are 16-byte aligned heap pointers: mix the bits.
    uint64_t h = static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(h >> 20) & (slots_.size() - 1);
  }

  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.size() * 2, Slot{});
    used_ = size_ = 0;
    for (auto& s : old) {
      if (s.id != 0 && s.live) {
        insert(s.id, s.value);
      }
    }
  }

  std::vector<Slot> slots_;
  size_t used_ = 0;  // live entries plus tombstones
  size_t size_ = 0;
};

}  // namespace fluxion::detail
