// AVX-512 helpers shared by the hand-written kernels (core/kernels/attention_kernel.cpp, core/kernels/epilogue.cpp).
// Include only from .cpp files: every function carries the target attribute, so those files build with
// the project's portable flags, and callers enter them only after use_avx512() (core/kernels/isa.h: the CPU has
// it and HEADPRUNE_MAX_ISA allows it).
#pragma once

// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_ps / _pd, GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "core/kernels/isa.h"

#define HP_AVX512 __attribute__((target("avx512f")))

namespace hp::core::simd {

// Whether an AVX-512 routine may run: the float32 passes' path is AVX-512 (core/kernels/isa.h).
inline bool use_avx512() { return isa::vector_path() == isa::Level::kAvx512; }

// The first n of 16 lanes (all for n ≥ 16, none for n ≤ 0): masked loads and stores of row tails.
HP_AVX512 inline __mmask16 lanes(long n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1);
}

// exp(x), Cephes' single-precision polynomial after x = n·ln2 + r, |r| ≤ ln2/2 (relative error ~1e-7);
// 0 below −87.3 (where expf reaches the denormals), so masked keys get exactly 0 as in torch.
HP_AVX512 inline __m512 exp_ps(__m512 x) {
  const __mmask16 zero = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_LT_OQ);
  // The constants first: vmaxps/vminps return their second operand when either is NaN, so NaN stays NaN
  // (as in torch) instead of becoming exp(−87.3) and finite, wrong outputs.
  x = _mm512_min_ps(_mm512_set1_ps(88.7f), _mm512_max_ps(_mm512_set1_ps(-87.3f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~zero), _mm512_scalef_ps(p, n));
}

// Transposes the 16×16 block in r[0..15] in registers (row i of the result is column i of the input).
HP_AVX512 inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 16; i += 8) {
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xDD);
    }
  }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xDD);
  }
}

}  // namespace hp::core::simd
