// The CPU's own limits (see core/kernels/peak.h).
#include "core/kernels/peak.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "core/kernels/isa.h"

namespace hp::core {

namespace {

// Independent accumulators per loop: enough to cover the instructions' latency on two ports.
constexpr int kChains = 12;
// Instructions per chain between two reads of the clock.
constexpr int64_t kBlock = 1 << 16;

enum class Width { k256, k512, kNone };

Width fma_width() {
  if (isa::usable(isa::Level::kAvx512)) return Width::k512;
  if (isa::usable(isa::Level::kAvx2)) return Width::k256;
  return Width::kNone;
}

Width int8_width() {
  if (isa::usable(isa::Level::kAvx512Vnni)) return Width::k512;
  if (isa::usable(isa::Level::kAvxVnni)) return Width::k256;
  return Width::kNone;
}

// Each loop runs kBlock rounds of kChains instructions and returns a value the compiler cannot drop.
__attribute__((target("avx512f"))) float fma512(int64_t blocks) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
  for (int64_t i = 0; i < blocks * kBlock; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  __m512 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0];
}

__attribute__((target("avx2,fma"))) float fma256(int64_t blocks) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
  for (int64_t i = 0; i < blocks * kBlock; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  __m256 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm256_add_ps(s, acc[c]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}

__attribute__((target("avx512f,avx512bf16"))) float bf16dot512(int64_t blocks) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3a83);  // 1, ~1e-3
  for (int64_t i = 0; i < blocks * kBlock; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  __m512 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0];
}

__attribute__((target("avx512f,avx512vnni"))) float int8dot512(int64_t blocks) {
  __m512i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(c);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < blocks * kBlock; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
  __m512i s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_epi32(s, acc[c]);
  int32_t out[16];
  _mm512_storeu_si512(out, s);
  return static_cast<float>(out[0]);
}

__attribute__((target("avx2,avxvnni"))) float int8dot256(int64_t blocks) {
  __m256i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_epi32(c);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
  for (int64_t i = 0; i < blocks * kBlock; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_dpbusd_avx_epi32(acc[c], a, b);
  int32_t out[8];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), acc[0]);
  return static_cast<float>(out[0]);
}

// The loop of `op` and the operations one block of it does (lanes x products per lane x 2 x chains x kBlock).
struct Loop {
  float (*run)(int64_t blocks) = nullptr;
  double ops_per_block = 0;
};

Loop loop_of(PeakOp op) {
  const double per_chain = static_cast<double>(kChains) * kBlock * 2;
  switch (op) {
    case PeakOp::kFp32Fma:
      if (fma_width() == Width::k512) return {fma512, 16 * per_chain};
      if (fma_width() == Width::k256) return {fma256, 8 * per_chain};
      return {};
    case PeakOp::kBf16Dot:
      if (isa::usable(isa::Level::kAvx512Bf16)) return {bf16dot512, 32 * per_chain};
      return {};
    case PeakOp::kInt8Dot:
      if (int8_width() == Width::k512) return {int8dot512, 64 * per_chain};
      if (int8_width() == Width::k256) return {int8dot256, 32 * per_chain};
      return {};
  }
  return {};
}

}  // namespace

const char* peak_op_name(PeakOp op) {
  switch (op) {
    case PeakOp::kFp32Fma:
      return fma_width() == Width::k256 ? "fp32 FMA (vfmadd231ps ymm)" : "fp32 FMA (vfmadd231ps zmm)";
    case PeakOp::kBf16Dot: return "bf16 dot (vdpbf16ps zmm)";
    case PeakOp::kInt8Dot:
      return int8_width() == Width::k256 ? "int8 dot (vpdpbusd ymm, AVX-VNNI)" : "int8 dot (vpdpbusd zmm)";
  }
  return "";
}

bool peak_op_usable(PeakOp op) { return loop_of(op).run != nullptr; }

double peak_gops(PeakOp op, int threads, double seconds) {
  const Loop loop = loop_of(op);
  if (!loop.run) return 0;
  threads = std::max(1, threads);
  loop.run(1);  // the clock up and the code in cache
  std::atomic<int64_t> blocks{0};
  std::atomic<float> sink{0};
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      float s = 0;
      int64_t n = 0;
      while (std::chrono::steady_clock::now() < until) s += loop.run(1), ++n;
      blocks += n;
      sink = sink + s;
    });
  for (auto& t : pool) t.join();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(blocks) * loop.ops_per_block / elapsed / 1e9;
}

}  // namespace hp::core
