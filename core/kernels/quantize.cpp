// int8 and bf16 conversions of the inference linears (see core/kernels/quantize.h), each with an AVX-512, an
// AVX2 and a portable path chosen by core/kernels/isa.h. The paths do the same float operations in the same
// order (no fused multiply-add), so they agree; tests run each path the CPU has against the hand computations
// and the documented bound (never bit for bit across paths).
#include "core/kernels/quantize.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/kernels/simd_avx2.h"
#include "core/kernels/simd_avx512.h"

namespace hp::core::quant {

namespace {

using simd::lanes;

// Enough rows per task that a task is worth a thread hand-off (~64K elements).
int64_t grain_rows(int64_t n) { return std::max<int64_t>(1, 65536 / std::max<int64_t>(n, 1)); }

struct RowRange {
  float lo = 0.0f, hi = 0.0f;
  bool finite = true;
};

// x_k, or x_k · c_k with column factors c (the inverse smoothing factors of a calibrated linear).
inline float scaled(const float* x, const float* c, int64_t k) { return c ? x[k] * c[k] : x[k]; }

RowRange range_portable(const float* x, const float* c, int64_t K) {
  RowRange r;
  for (int64_t k = 0; k < K; ++k) {
    const float v = scaled(x, c, k);
    if (!std::isfinite(v)) r.finite = false;
    r.lo = std::min(r.lo, v);
    r.hi = std::max(r.hi, v);
  }
  return r;
}

HP_AVX512 inline __m512 load_scaled(const float* x, const float* c, int64_t k, __mmask16 m) {
  const __m512 v = _mm512_maskz_loadu_ps(m, x + k);
  return c ? _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, c + k)) : v;
}

HP_AVX512 RowRange range_avx512(const float* x, const float* c, int64_t K) {
  __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps(), bad = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 16) {
    const __mmask16 m = lanes(K - k);
    const __m512 v = load_scaled(x, c, k, m);
    lo = _mm512_min_ps(lo, v);
    hi = _mm512_max_ps(hi, v);
    bad = _mm512_add_ps(bad, _mm512_mul_ps(v, _mm512_setzero_ps()));  // NaN once any value is NaN or ±inf
  }
  RowRange r;
  r.lo = _mm512_reduce_min_ps(lo);
  r.hi = _mm512_reduce_max_ps(hi);
  r.finite = !std::isnan(_mm512_reduce_add_ps(bad));
  return r;
}

HP_AVX2 inline __m256 load_scaled8(const float* x, const float* c, int64_t k, __m256i m) {
  const __m256 v = simd::load8(x + k, m);
  return c ? _mm256_mul_ps(v, simd::load8(c + k, m)) : v;
}

// Masked-off lanes load 0, which the range holds anyway (lo ≤ 0 ≤ hi).
HP_AVX2 RowRange range_avx2(const float* x, const float* c, int64_t K) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; k += 8) {
    const __m256 v = load_scaled8(x, c, k, simd::lanes8(K - k));
    lo = _mm256_min_ps(lo, v);
    hi = _mm256_max_ps(hi, v);
    bad = _mm256_add_ps(bad, _mm256_mul_ps(v, _mm256_setzero_ps()));  // NaN once any value is NaN or ±inf
  }
  RowRange r;
  r.lo = simd::reduce_min(lo);
  r.hi = simd::reduce_max(hi);
  r.finite = !std::isnan(simd::reduce_add(bad));
  return r;
}

// The row's scale and zero point from its range; scale NaN for a row holding NaN or ±inf.
void row_params(const RowRange& r, float* scale, int32_t* zero) {
  if (!r.finite) {
    *scale = std::numeric_limits<float>::quiet_NaN();
    *zero = 0;
    return;
  }
  const float s = (r.hi - r.lo) / 255.0f;
  if (!(s > 0.0f) || !std::isfinite(s)) {  // an all-zero row (hi = lo = 0), or a range past float's
    *scale = s > 0.0f ? std::numeric_limits<float>::quiet_NaN() : 1.0f;
    *zero = 0;
    return;
  }
  *scale = s;
  *zero = static_cast<int32_t>(std::min(255.0f, std::max(0.0f, std::nearbyint(-r.lo / s))));
}

void quantize_row_portable(const float* x, const float* c, int64_t K, float inv, float zero, uint8_t* q) {
  for (int64_t k = 0; k < K; ++k)
    q[k] = static_cast<uint8_t>(std::min(255.0f, std::max(0.0f, std::nearbyint(scaled(x, c, k) * inv) + zero)));
}

HP_AVX512 void quantize_row_avx512(const float* x, const float* c, int64_t K, float inv, float zero, uint8_t* q) {
  const __m512 vinv = _mm512_set1_ps(inv), vz = _mm512_set1_ps(zero), v0 = _mm512_setzero_ps(),
               v255 = _mm512_set1_ps(255.0f);
  for (int64_t k = 0; k < K; k += 16) {
    const __mmask16 m = lanes(K - k);
    __m512 v = _mm512_roundscale_ps(_mm512_mul_ps(load_scaled(x, c, k, m), vinv),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_min_ps(v255, _mm512_max_ps(v0, _mm512_add_ps(v, vz)));
    _mm512_mask_cvtusepi32_storeu_epi8(q + k, m, _mm512_cvtps_epu32(v));
  }
}

HP_AVX2 void quantize_row_avx2(const float* x, const float* c, int64_t K, float inv, float zero, uint8_t* q) {
  const __m256 vinv = _mm256_set1_ps(inv), vz = _mm256_set1_ps(zero), v0 = _mm256_setzero_ps(),
               v255 = _mm256_set1_ps(255.0f);
  for (int64_t k = 0; k < K; k += 8) {
    const __m256i m = simd::lanes8(K - k);
    __m256 v = _mm256_round_ps(_mm256_mul_ps(load_scaled8(x, c, k, m), vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm256_min_ps(v255, _mm256_max_ps(v0, _mm256_add_ps(v, vz)));
    const __m256i i = _mm256_cvtps_epi32(v);  // whole numbers in [0, 255]: exact
    const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    const __m128i b = _mm_packus_epi16(w, w);
    if (K - k >= 8) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(q + k), b);
    } else {
      alignas(16) uint8_t tail[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(tail), b);
      std::memcpy(q + k, tail, static_cast<size_t>(K - k));
    }
  }
}

void dequantize_row_portable(const int32_t* c, float* y, int64_t N, float sm, int32_t z, const float* sn,
                             const int32_t* colsum, bool accumulate) {
  for (int64_t n = 0; n < N; ++n) {
    const float a = sm * sn[n];
    const float v = static_cast<float>(c[n] - z * colsum[n]) * a;
    y[n] = accumulate ? y[n] + v : v;
  }
}

HP_AVX512 void dequantize_row_avx512(const int32_t* c, float* y, int64_t N, float sm, int32_t z, const float* sn,
                                     const int32_t* colsum, bool accumulate) {
  const __m512 vs = _mm512_set1_ps(sm);
  const __m512i vz = _mm512_set1_epi32(z);
  for (int64_t n = 0; n < N; n += 16) {
    const __mmask16 m = lanes(N - n);
    const __m512i ci = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(m, c + n),
                                        _mm512_mullo_epi32(vz, _mm512_maskz_loadu_epi32(m, colsum + n)));
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(ci), _mm512_mul_ps(vs, _mm512_maskz_loadu_ps(m, sn + n)));
    if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + n), v);
    _mm512_mask_storeu_ps(y + n, m, v);
  }
}

template <bool kMasked>
HP_AVX2 inline __m256i load_int32x8(const int32_t* p, __m256i m) {
  return kMasked ? _mm256_maskload_epi32(p, m) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Eight outputs of a row: whole vectors with plain loads and stores, the tail (kMasked) with masked ones — on the
// AMD EPYC (Zen 3) a masked store on every vector made this pass take 9.5% of an int8 forward (perf).
template <bool kMasked>
HP_AVX2 inline void dequantize8_avx2(const int32_t* c, float* y, __m256 vs, __m256i vz, const float* sn,
                                     const int32_t* colsum, bool accumulate, __m256i m) {
  const __m256i ci =
      _mm256_sub_epi32(load_int32x8<kMasked>(c, m), _mm256_mullo_epi32(vz, load_int32x8<kMasked>(colsum, m)));
  __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(ci), _mm256_mul_ps(vs, simd::load_part<kMasked>(sn, m)));
  if (accumulate) v = _mm256_add_ps(simd::load_part<kMasked>(y, m), v);
  simd::store_part<kMasked>(y, m, v);
}

HP_AVX2 void dequantize_row_avx2(const int32_t* c, float* y, int64_t N, float sm, int32_t z, const float* sn,
                                 const int32_t* colsum, bool accumulate) {
  const __m256 vs = _mm256_set1_ps(sm);
  const __m256i vz = _mm256_set1_epi32(z), all = _mm256_set1_epi32(-1);
  int64_t n = 0;
  for (; n + 8 <= N; n += 8) dequantize8_avx2<false>(c + n, y + n, vs, vz, sn + n, colsum + n, accumulate, all);
  if (n < N) dequantize8_avx2<true>(c + n, y + n, vs, vz, sn + n, colsum + n, accumulate, simd::lanes8(N - n));
}

HP_AVX512 void to_bf16_row_avx512(const float* x, int64_t K, uint16_t* y) {
  const __m512i round = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1), qnan = _mm512_set1_epi32(0x0040);
  for (int64_t k = 0; k < K; k += 16) {
    const __mmask16 m = lanes(K - k);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + k);
    const __m512i u = _mm512_castps_si512(v);
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(round, _mm512_and_si512(_mm512_srli_epi32(u, 16), one))), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), qnan);
    _mm512_mask_cvtepi32_storeu_epi16(y + k, m, r);
  }
}

}  // namespace

uint16_t to_bf16(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  if (std::isnan(v)) return static_cast<uint16_t>((u >> 16) | 0x0040);
  return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

float bf16_to_float(uint16_t v) {
  const uint32_t u = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

void quantize_weight_rows(const float* w, int64_t N, int64_t K, int8_t* q, float* scale, int32_t* colsum, int qmax) {
  const float top = static_cast<float>(qmax);
  for (int64_t n = 0; n < N; ++n) {
    const float* row = w + n * K;
    float amax = 0.0f;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(row[k]));
    const float s = amax > 0.0f ? amax / top : 1.0f;
    int32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      const auto v = static_cast<int8_t>(std::min(top, std::max(-top, std::nearbyint(row[k] / s))));
      q[n * K + k] = v;
      sum += v;
    }
    scale[n] = s;
    colsum[n] = sum;
  }
}

void quantize_activation_rows(const float* x, int64_t ldx, int64_t M, int64_t K, uint8_t* q, float* scale,
                              int32_t* zero, const float* col_mul) {
  const isa::Level path = isa::vector_path();
  at::parallel_for(0, M, grain_rows(K), [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      const float* row = x + m * ldx;
      row_params(path == isa::Level::kAvx512 ? range_avx512(row, col_mul, K)
                 : path == isa::Level::kAvx2 ? range_avx2(row, col_mul, K)
                                             : range_portable(row, col_mul, K),
                 scale + m, zero + m);
      uint8_t* out = q + m * K;
      if (std::isnan(scale[m])) {
        std::memset(out, 0, static_cast<size_t>(K));
        continue;
      }
      const float inv = 1.0f / scale[m], z = static_cast<float>(zero[m]);
      if (path == isa::Level::kAvx512) quantize_row_avx512(row, col_mul, K, inv, z, out);
      else if (path == isa::Level::kAvx2) quantize_row_avx2(row, col_mul, K, inv, z, out);
      else quantize_row_portable(row, col_mul, K, inv, z, out);
    }
  });
}

void dequantize_rows(const int32_t* c, int64_t ldc, float* y, int64_t ldy, int64_t M, int64_t N,
                     const float* row_scale, const int32_t* row_zero, const float* col_scale, const int32_t* colsum,
                     bool accumulate, const std::function<void(int64_t, int64_t)>& after) {
  const isa::Level path = isa::vector_path();
  const auto row = path == isa::Level::kAvx512 ? dequantize_row_avx512
                   : path == isa::Level::kAvx2 ? dequantize_row_avx2
                                               : dequantize_row_portable;
  at::parallel_for(0, M, grain_rows(N), [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m)
      row(c + m * ldc, y + m * ldy, N, row_scale[m], row_zero[m], col_scale, colsum, accumulate);
    if (after) after(begin, end);
  });
}

void to_bf16_rows(const float* x, int64_t ldx, int64_t M, int64_t K, uint16_t* y) {
  const bool vec = simd::use_avx512();
  at::parallel_for(0, M, grain_rows(K), [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      if (vec) {
        to_bf16_row_avx512(x + m * ldx, K, y + m * K);
        continue;
      }
      for (int64_t k = 0; k < K; ++k) y[m * K + k] = to_bf16(x[m * ldx + k]);
    }
  });
}

}  // namespace hp::core::quant
