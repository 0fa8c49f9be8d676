// The devices of the tests that compare GPU results with the CPU's (they
// skip where no GPU is visible), and a scope with a thread default device.
#pragma once

#include <gtest/gtest.h>

#include "fluxion/fluxion.h"

namespace fluxion::test {

inline const Device kGpu{Device::gpu};
inline const Device kCpu{Device::cpu};

#define SKIP_WITHOUT_GPU()               \
  if (!is_available(Device::gpu)) {      \
    GTEST_SKIP() << "no GPU is visible"; \
  }

// This thread's default device for the lifetime of the object (the ops a
// test builds, and the ones the gradient rules build, go there).
struct OnDevice {
  Device saved;
  explicit OnDevice(Device d) : saved(default_device()) {
    detail::set_thread_default_device(d);
  }
  ~OnDevice() { detail::set_thread_default_device(saved); }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;
};

}  // namespace fluxion::test
