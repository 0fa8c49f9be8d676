// The host's allocator (allocator.cpp), which the CPU backend hands to the
// core as the cpu's (Backend::device_allocator).
#pragma once

#include "fluxion/allocator.h"

namespace fluxion::cpu {

allocator::Allocator& host_allocator();

}  // namespace fluxion::cpu
