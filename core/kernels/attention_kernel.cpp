// The attention kernel's interface (see core/kernels/attention_kernel.h): the switch, the scratch size, the
// prefetch, and the choice between the AVX-512 and the AVX2 kernel on isa::vector_path().
#include "core/kernels/attention_kernel.h"

#include <algorithm>
#include <atomic>
#include <cstddef>

#include "core/kernels/isa.h"

namespace hp::core {

namespace {

std::atomic<bool> g_enabled{true}, g_bf16_enabled{true};

}  // namespace

bool attention_kernel_available() {
  return isa::vector_path() != isa::Level::kScalar && g_enabled.load(std::memory_order_relaxed);
}

void set_attention_kernel_enabled(bool enabled) { g_enabled.store(enabled, std::memory_order_relaxed); }

void set_bf16_attention_enabled(bool enabled) { g_bf16_enabled.store(enabled, std::memory_order_relaxed); }

ScopedFloat32Attention::ScopedFloat32Attention() : was_(g_bf16_enabled.exchange(false)) {}
ScopedFloat32Attention::~ScopedFloat32Attention() { g_bf16_enabled.store(was_); }

bool bf16_attention_available() {
  return isa::vector_path() == isa::Level::kAvx512 && isa::usable(isa::Level::kAvx512Bf16) &&
         g_enabled.load(std::memory_order_relaxed) && g_bf16_enabled.load(std::memory_order_relaxed);
}

std::size_t attention_pair_scratch(int S, int Dh) {
  // The largest need of the paths, so that the size does not depend on a cap lowered in between.
  const std::size_t f32 = static_cast<std::size_t>(attention_isa::packed_ld(S)) *
                          static_cast<std::size_t>(Dh + attention_isa::kMaxBlockRows);
  return std::max(f32, attention_isa::bf16_scratch(S, Dh));
}

void attend_pair(const AttentionPair& a, float* scratch) {
  if (a.bf16 && !a.p && bf16_attention_available()) attention_isa::attend_bf16(a, scratch);
  else if (isa::vector_path() == isa::Level::kAvx512) attention_isa::attend_avx512(a, scratch);
  else attention_isa::attend_avx2(a, scratch);
}

void prefetch_pair(const AttentionPair& a) {
  // Rows of one head are Dh floats inside long rows (all heads, often q|k|v): too far apart for the
  // hardware prefetcher, which stays inside a 4 KB page.
  auto rows = [](const float* base, std::ptrdiff_t ld, int n, int Dh) {
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < Dh; c += 16) __builtin_prefetch(base + r * ld + c, 0, 2);
  };
  rows(a.k, a.ldk, a.S, a.Dh);
  rows(a.q, a.ldq, a.Sq, a.Dh);
  rows(a.v, a.ldv, a.S, a.Dh);
}

}  // namespace hp::core
