// The one switch over every hand-written SIMD routine (the attention kernel, the epilogues, the head
// distances of `prune analyze`): off, each takes the portable path it takes on a CPU without AVX-512, so
// tests run both paths on any machine (#30) and benchmarks compare them. Torch-free and intrinsics-free:
// safe to include anywhere. The kernels' own switches (set_attention_kernel_enabled, ...) stay; a routine
// runs its AVX-512 path only when the CPU has it, this switch is on and its own switch is on.
#pragma once

#include <atomic>

namespace hp::core::simd {

inline std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> on{true};
  return on;
}
inline void set_enabled(bool on) { enabled_flag().store(on, std::memory_order_relaxed); }
inline bool enabled() { return enabled_flag().load(std::memory_order_relaxed); }

}  // namespace hp::core::simd
