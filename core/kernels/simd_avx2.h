// AVX2 + FMA helpers shared by the hand-written kernels' AVX2 paths (the 256-bit twins of
// core/kernels/simd_avx512.h). Include only from .cpp files: every function carries the target attribute, so
// those files build with the project's portable flags, and callers enter them only when isa::vector_path()
// (core/kernels/isa.h) says the float32 passes' path is AVX2.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "core/kernels/isa.h"

#define HP_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace hp::core::simd {

// A lane mask of the first n of 8 lanes (all for n ≥ 8, none for n ≤ 0), for _mm256_maskload/maskstore.
HP_AVX2 inline __m256i lanes8(long n) {
  const long k = n >= 8 ? 8 : n <= 0 ? 0 : n;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(k)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Masked load: lanes outside `m` read as 0 and touch no memory.
HP_AVX2 inline __m256 load8(const float* p, __m256i m) { return _mm256_maskload_ps(p, m); }
HP_AVX2 inline void store8(float* p, __m256i m, __m256 v) { _mm256_maskstore_ps(p, m, v); }

// The first n floats of p as 8 lanes (the rest 0): a plain load when all 8 are there, else a masked one.
// Stores write only the first n lanes; a plain store when n ≥ 8. Masked loads cost what plain ones do, but a
// masked store took ~7× a plain one on the AMD EPYC (Zen) this was written on: loops keep them for tails.
HP_AVX2 inline __m256 load_first(const float* p, long n) {
  return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes8(n));
}
HP_AVX2 inline void store_first(float* p, long n, __m256 v) {
  if (n >= 8) _mm256_storeu_ps(p, v);
  else _mm256_maskstore_ps(p, lanes8(n), v);
}

// A whole vector (kMasked false: `m` unused) or the masked tail of a row, chosen at compile time: row loops
// run a chunk body templated on kMasked over the whole vectors, then once with the tail's mask.
template <bool kMasked>
HP_AVX2 inline __m256 load_part(const float* p, __m256i m) {
  return kMasked ? _mm256_maskload_ps(p, m) : _mm256_loadu_ps(p);
}
template <bool kMasked>
HP_AVX2 inline void store_part(float* p, __m256i m, __m256 v) {
  if (kMasked) _mm256_maskstore_ps(p, m, v);
  else _mm256_storeu_ps(p, v);
}

// Horizontal reductions of 8 lanes.
HP_AVX2 inline float reduce_add(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
HP_AVX2 inline float reduce_max(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
HP_AVX2 inline float reduce_min(__m256 v) {
  __m128 s = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_min_ps(s, _mm_movehl_ps(s, s));
  s = _mm_min_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// exp(x) for x ≤ 0 (or NaN, which stays NaN): softmax's x − max and GELU's −u². The same Cephes polynomial as
// simd_avx512.h's exp_ps (relative error ~1.2e-7), and 0 below −87.3, but n = round(x·log2 e) ∈ [−126, 0] comes from the
// magic-number addition t = x·log2 e + 1.5·2^23 + 127, whose low bits are n + 127: 2^n is t's bits shifted
// left by 23, with no rounding instruction, conversion or two-step scale (~20% faster GELU on Zen).
// Not for x > 0 (2^n would overflow the exponent field).
HP_AVX2 inline __m256 exp_nonpositive_ps(__m256 x) {
  const __m256 zero = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm256_max_ps(_mm256_set1_ps(-87.3f), x);  // the constant first: a NaN x stays NaN
  const __m256 magic = _mm256_set1_ps(12582912.0f + 127.0f);
  const __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), magic);
  const __m256 n = _mm256_sub_ps(t, magic);  // exact: round(x·log2 e)
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23));
  return _mm256_andnot_ps(zero, _mm256_mul_ps(p, scale));
}

}  // namespace hp::core::simd
