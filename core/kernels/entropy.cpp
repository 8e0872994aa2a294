// Σ m ln m of two probability maps, the sum the Jensen-Shannon divergence of attention maps reads: scalar, AVX2 and
// AVX-512, dispatched on the process's float32 path.
#include "core/kernels/entropy.h"

#include <cmath>

#include "core/kernels/simd_avx512.h"  // first: its pragmas must precede <immintrin.h>
#include "core/kernels/simd_avx2.h"
#include "core/kernels/isa.h"

namespace hp::core {
namespace {

// Σ_k m_k ln m_k over k < len with m = (p + q) / 2.
double sum_m_log_m_scalar(const float* p, const float* q, long len) {
  double s = 0;
  for (long k = 0; k < len; ++k) {
    const double m = 0.5 * (static_cast<double>(p[k]) + q[k]);
    s += m * std::log(m);
  }
  return s;
}

// Cephes' single-precision logf polynomial in r = f - 1, f in [√½, √2): its leading coefficient, then the rest in
// Horner order (relative error ~1e-7).
constexpr float kLogPoly0 = 7.0376836292e-2f;
constexpr float kLogPoly[] = {-1.1514610310e-1f, 1.1676998740e-1f, -1.2420140846e-1f, 1.4249322787e-1f,
                              -1.6668057665e-1f, 2.0000714765e-1f,  -2.4999993993e-1f, 3.3333331174e-1f};

// ln x for x > 0 through kLogPoly.
HP_AVX512 inline __m512 log_ps(__m512 x) {
  const __m512 e = _mm512_getexp_ps(x);  // floor(log2 x)
  __m512 f = _mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_src);  // [1, 2)
  // Move the mantissa to [√½, √2) so the polynomial stays accurate.
  const __mmask16 big = _mm512_cmp_ps_mask(f, _mm512_set1_ps(1.41421356f), _CMP_GT_OQ);
  f = _mm512_mask_mul_ps(f, big, f, _mm512_set1_ps(0.5f));
  const __m512 ex = _mm512_mask_add_ps(e, big, e, _mm512_set1_ps(1.0f));
  const __m512 r = _mm512_sub_ps(f, _mm512_set1_ps(1.0f));
  __m512 y = _mm512_set1_ps(kLogPoly0);
  for (float c : kLogPoly)
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(c));
  const __m512 r2 = _mm512_mul_ps(r, r);
  y = _mm512_mul_ps(_mm512_mul_ps(y, r), r2);
  y = _mm512_fnmadd_ps(_mm512_set1_ps(0.5f), r2, y);
  y = _mm512_add_ps(y, r);
  return _mm512_fmadd_ps(ex, _mm512_set1_ps(0.69314718056f), y);
}

// m ln m with m = (p + q) / 2 for 16 lanes.
HP_AVX512 inline __m512 m_log_m(const float* p, const float* q) {
  const __m512 m = _mm512_mul_ps(_mm512_set1_ps(0.5f), _mm512_add_ps(_mm512_loadu_ps(p), _mm512_loadu_ps(q)));
  return _mm512_mul_ps(m, log_ps(m));
}

// acc0/acc1 += the low/high 8 lanes of v in double precision.
HP_AVX512 inline void add_pd(__m512d& acc0, __m512d& acc1, __m512 v) {
  acc0 = _mm512_add_pd(acc0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
  acc1 = _mm512_add_pd(acc1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

// len is a multiple of 16 (the padding holds 1 in both maps: 1 ln 1 = 0). Four vectors are summed in
// single precision, then added to double accumulators.
HP_AVX512 double sum_m_log_m_avx512(const float* p, const float* q, long len) {
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  long k = 0;
  for (; k + 64 <= len; k += 64)
    add_pd(acc0, acc1,
           _mm512_add_ps(_mm512_add_ps(m_log_m(p + k, q + k), m_log_m(p + k + 16, q + k + 16)),
                         _mm512_add_ps(m_log_m(p + k + 32, q + k + 32), m_log_m(p + k + 48, q + k + 48))));
  for (; k < len; k += 16) add_pd(acc0, acc1, m_log_m(p + k, q + k));
  return _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
}

// The AVX2 twin of log_ps: floor(log2 x) and the mantissa in [1, 2) read from the bits (x > 0 and normal:
// m ≥ 0.001/n), then the same move to [√½, √2) and the same polynomial.
HP_AVX2 inline __m256 log_ps(__m256 x) {
  const __m256i bits = _mm256_castps_si256(x);
  __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(127)));
  __m256 f = _mm256_castsi256_ps(
      _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007FFFFF)), _mm256_set1_epi32(0x3F800000)));
  const __m256 big = _mm256_cmp_ps(f, _mm256_set1_ps(1.41421356f), _CMP_GT_OQ);
  f = _mm256_blendv_ps(f, _mm256_mul_ps(f, _mm256_set1_ps(0.5f)), big);
  e = _mm256_add_ps(e, _mm256_and_ps(big, _mm256_set1_ps(1.0f)));
  const __m256 r = _mm256_sub_ps(f, _mm256_set1_ps(1.0f));
  __m256 y = _mm256_set1_ps(kLogPoly0);
  for (float c : kLogPoly)
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(c));
  const __m256 r2 = _mm256_mul_ps(r, r);
  y = _mm256_mul_ps(_mm256_mul_ps(y, r), r2);
  y = _mm256_fnmadd_ps(_mm256_set1_ps(0.5f), r2, y);
  y = _mm256_add_ps(y, r);
  return _mm256_fmadd_ps(e, _mm256_set1_ps(0.69314718056f), y);
}

// m ln m with m = (p + q) / 2 for 8 lanes.
HP_AVX2 inline __m256 m_log_m8(const float* p, const float* q) {
  const __m256 m = _mm256_mul_ps(_mm256_set1_ps(0.5f), _mm256_add_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(q)));
  return _mm256_mul_ps(m, log_ps(m));
}

// acc0/acc1 += the low/high 4 lanes of v in double precision.
HP_AVX2 inline void add_pd(__m256d& acc0, __m256d& acc1, __m256 v) {
  acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

// As sum_m_log_m_avx512 on 8 lanes: four vectors (32 floats) summed in single precision, then added to
// double accumulators.
HP_AVX2 double sum_m_log_m_avx2(const float* p, const float* q, long len) {
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
  long k = 0;
  for (; k + 32 <= len; k += 32)
    add_pd(acc0, acc1,
           _mm256_add_ps(_mm256_add_ps(m_log_m8(p + k, q + k), m_log_m8(p + k + 8, q + k + 8)),
                         _mm256_add_ps(m_log_m8(p + k + 16, q + k + 16), m_log_m8(p + k + 24, q + k + 24))));
  for (; k < len; k += 8) add_pd(acc0, acc1, m_log_m8(p + k, q + k));
  const __m256d s = _mm256_add_pd(acc0, acc1);
  const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
  return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

}  // namespace

SumMLogM sum_m_log_m_kernel() {
  switch (isa::vector_path()) {
    case isa::Level::kAvx512: return &sum_m_log_m_avx512;
    case isa::Level::kAvx2: return &sum_m_log_m_avx2;
    default: return &sum_m_log_m_scalar;
  }
}

}  // namespace hp::core
