// The AVX-512 and AVX2 epilogues of the inference GEMMs (see core/kernels/epilogue.h): the same arithmetic
// on 16 or 8 lanes, chosen once per call from isa::vector_path().
#include "core/kernels/epilogue.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "core/kernels/simd_avx512.h"  // first: its pragmas must precede <immintrin.h>
#include "core/kernels/simd_avx2.h"

namespace hp::core {

namespace {

using simd::exp_ps;
using simd::lanes;

std::atomic<bool> g_enabled{true};

// ---- AVX-512F: 16 lanes, masked tails ----

// 0.5 · x · (1 + erf(x / √2)). With u = |x| / √2, t = 1 / (1 + p·u) and q = poly(t) · exp(−u²),
// A&S 7.1.26 gives erf(u) = 1 − q, so 1 + erf(x/√2) is 2 − q for x ≥ 0 and q itself for x < 0 (no
// cancellation where GELU is small).
HP_AVX512 inline __m512 gelu_erf(__m512 x) {
  const __m512 u = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.70710678118654752f));
  const __m512 d = _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), u, _mm512_set1_ps(1.0f));
  __m512 t = _mm512_rcp14_ps(d);  // 14 bits, then one Newton step: t · (2 − d·t)
  t = _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(2.0f)));
  __m512 poly = _mm512_set1_ps(1.061405429f);
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-1.453152027f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(1.421413741f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-0.284496736f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(0.254829592f));
  poly = _mm512_mul_ps(poly, t);
  const __m512 q = _mm512_mul_ps(poly, exp_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), u), u)));
  const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 one_plus_erf = _mm512_mask_mov_ps(_mm512_sub_ps(_mm512_set1_ps(2.0f), q), negative, q);
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), one_plus_erf);
}

template <EpilogueActivation kAct>
HP_AVX512 void bias_activation_row_avx512(float* y, int64_t n, const float* bias) {
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = lanes(n - j);
    const __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(k, y + j), _mm512_maskz_loadu_ps(k, bias + j));
    // max(0, v) returns its second operand when one is NaN: a NaN passes through, as in torch::relu.
    _mm512_mask_storeu_ps(y + j, k,
                          kAct == EpilogueActivation::kRelu   ? _mm512_max_ps(_mm512_setzero_ps(), v)
                          : kAct == EpilogueActivation::kNone ? v
                                                              : gelu_erf(v));
  }
}

HP_AVX512 void bias_residual_layer_norm_row_avx512(float* y, const float* residual, const float* bias,
                                                   const float* gamma, const float* beta, int64_t n, float eps) {
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {  // v = y + bias + residual, kept in y (the row stays in L1)
    const __mmask16 k = lanes(n - j);
    const __m512 v = _mm512_add_ps(_mm512_add_ps(_mm512_maskz_loadu_ps(k, y + j), _mm512_maskz_loadu_ps(k, bias + j)),
                                   _mm512_maskz_loadu_ps(k, residual + j));
    _mm512_mask_storeu_ps(y + j, k, v);
    sum = _mm512_add_ps(sum, v);
  }
  const __m512 mean = _mm512_set1_ps(_mm512_reduce_add_ps(sum) / static_cast<float>(n));
  __m512 squares = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = lanes(n - j);
    const __m512 c = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, y + j), mean);
    squares = _mm512_fmadd_ps(c, c, squares);
  }
  const float var = _mm512_reduce_add_ps(squares) / static_cast<float>(n);
  const __m512 rstd = _mm512_set1_ps(1.0f / std::sqrt(var + eps));
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = lanes(n - j);
    const __m512 c = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, y + j), mean), rstd);
    _mm512_mask_storeu_ps(y + j, k,
                          _mm512_fmadd_ps(c, _mm512_maskz_loadu_ps(k, gamma + j), _mm512_maskz_loadu_ps(k, beta + j)));
  }
}

// ---- AVX2 + FMA: 8 lanes; whole vectors, then the tail through a mask (kMasked) ----

// The A&S 7.1.26 form of the AVX-512 gelu_erf, rearranged for 8 lanes: with q as there (1 + erf(x/√2) is
// 2 − q for x ≥ 0 and q for x < 0), GELU = max(x, 0) − ½|x|·q in one fnmadd, and exp(−u²) by
// exp_nonpositive_ps. 1/d is a division: as fast as rcp_ps and a Newton step on Zen, and exact.
HP_AVX2 inline __m256 gelu_erf(__m256 x) {
  const __m256 u = _mm256_mul_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(0.70710678118654752f));
  const __m256 t =
      _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), u, _mm256_set1_ps(1.0f)));
  __m256 poly = _mm256_set1_ps(1.061405429f);
  poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(-1.453152027f));
  poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(1.421413741f));
  poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(-0.284496736f));
  poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(0.254829592f));
  poly = _mm256_mul_ps(poly, t);
  const __m256 q =
      _mm256_mul_ps(poly, simd::exp_nonpositive_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), u), u)));
  // ½|x| = u/√2. max(0, x) returns its second operand when one is NaN: a NaN passes through.
  const __m256 half_abs = _mm256_mul_ps(u, _mm256_set1_ps(0.70710678118654752f));
  return _mm256_fnmadd_ps(half_abs, q, _mm256_max_ps(_mm256_setzero_ps(), x));
}

template <EpilogueActivation kAct, bool kMasked>
HP_AVX2 inline void bias_activation_part(float* y, const float* bias, __m256i m) {
  const __m256 v = _mm256_add_ps(simd::load_part<kMasked>(y, m), simd::load_part<kMasked>(bias, m));
  // max(0, v) returns its second operand when one is NaN: a NaN passes through, as in torch::relu.
  simd::store_part<kMasked>(y, m,
                            kAct == EpilogueActivation::kRelu   ? _mm256_max_ps(_mm256_setzero_ps(), v)
                            : kAct == EpilogueActivation::kNone ? v
                                                                : gelu_erf(v));
}

template <EpilogueActivation kAct>
HP_AVX2 void bias_activation_row_avx2(float* y, int64_t n, const float* bias) {
  const int64_t whole = n / 8 * 8;
  const __m256i tail = simd::lanes8(n - whole);
  for (int64_t j = 0; j < whole; j += 8) bias_activation_part<kAct, false>(y + j, bias + j, tail);
  if (whole < n) bias_activation_part<kAct, true>(y + whole, bias + whole, tail);
}

// v = y + bias + residual into y; returns v (0 in the lanes outside a tail's mask).
template <bool kMasked>
HP_AVX2 inline __m256 add_part(float* y, const float* bias, const float* residual, __m256i m) {
  using simd::load_part;
  const __m256 yb = _mm256_add_ps(load_part<kMasked>(y, m), load_part<kMasked>(bias, m));
  const __m256 v = _mm256_add_ps(yb, load_part<kMasked>(residual, m));
  simd::store_part<kMasked>(y, m, v);
  return v;
}

// y − mean, 0 in the lanes outside a tail's mask.
template <bool kMasked>
HP_AVX2 inline __m256 centred_part(const float* y, __m256 mean, __m256i m) {
  const __m256 c = _mm256_sub_ps(simd::load_part<kMasked>(y, m), mean);
  return kMasked ? _mm256_and_ps(c, _mm256_castsi256_ps(m)) : c;
}

template <bool kMasked>
HP_AVX2 inline void normalise_part(float* y, const float* gamma, const float* beta, __m256 mean, __m256 rstd,
                                   __m256i m) {
  using simd::load_part;
  const __m256 c = _mm256_mul_ps(_mm256_sub_ps(load_part<kMasked>(y, m), mean), rstd);
  simd::store_part<kMasked>(y, m, _mm256_fmadd_ps(c, load_part<kMasked>(gamma, m), load_part<kMasked>(beta, m)));
}

HP_AVX2 void bias_residual_layer_norm_row_avx2(float* y, const float* residual, const float* bias, const float* gamma,
                                               const float* beta, int64_t n, float eps) {
  const int64_t whole = n / 8 * 8;
  const __m256i tail = simd::lanes8(n - whole);
  __m256 sum = _mm256_setzero_ps();  // v = y + bias + residual, kept in y (the row stays in L1)
  for (int64_t j = 0; j < whole; j += 8) sum = _mm256_add_ps(sum, add_part<false>(y + j, bias + j, residual + j, tail));
  if (whole < n) sum = _mm256_add_ps(sum, add_part<true>(y + whole, bias + whole, residual + whole, tail));
  const __m256 mean = _mm256_set1_ps(simd::reduce_add(sum) / static_cast<float>(n));
  __m256 squares = _mm256_setzero_ps();
  for (int64_t j = 0; j < whole; j += 8) {
    const __m256 c = centred_part<false>(y + j, mean, tail);
    squares = _mm256_fmadd_ps(c, c, squares);
  }
  if (whole < n) {
    const __m256 c = centred_part<true>(y + whole, mean, tail);
    squares = _mm256_fmadd_ps(c, c, squares);
  }
  const float var = simd::reduce_add(squares) / static_cast<float>(n);
  const __m256 rstd = _mm256_set1_ps(1.0f / std::sqrt(var + eps));
  for (int64_t j = 0; j < whole; j += 8) normalise_part<false>(y + j, gamma + j, beta + j, mean, rstd, tail);
  if (whole < n) normalise_part<true>(y + whole, gamma + whole, beta + whole, mean, rstd, tail);
}

// ---- the row functions of the path ----

using ActivationRowFn = void (*)(float*, int64_t, const float*);
using LayerNormRowFn = void (*)(float*, const float*, const float*, const float*, const float*, int64_t, float);

template <EpilogueActivation kAct>
ActivationRowFn activation_row_of(bool avx512) {
  return avx512 ? &bias_activation_row_avx512<kAct> : &bias_activation_row_avx2<kAct>;
}

ActivationRowFn activation_row(EpilogueActivation act) {
  const bool avx512 = simd::use_avx512();
  switch (act) {
    case EpilogueActivation::kRelu: return activation_row_of<EpilogueActivation::kRelu>(avx512);
    case EpilogueActivation::kNone: return activation_row_of<EpilogueActivation::kNone>(avx512);
    case EpilogueActivation::kGeluErf: break;
  }
  return activation_row_of<EpilogueActivation::kGeluErf>(avx512);
}

LayerNormRowFn layer_norm_row() {
  return simd::use_avx512() ? &bias_residual_layer_norm_row_avx512 : &bias_residual_layer_norm_row_avx2;
}

// Enough rows per task that a task is worth a thread hand-off (~64K elements).
int64_t grain_rows(int64_t n) { return std::max<int64_t>(1, 65536 / std::max<int64_t>(n, 1)); }

}  // namespace

bool epilogue_kernels_available() {
  return isa::vector_path() != isa::Level::kScalar && g_enabled.load(std::memory_order_relaxed);
}

void set_epilogue_kernels_enabled(bool enabled) { g_enabled.store(enabled, std::memory_order_relaxed); }

void bias_activation_rows(float* y, int64_t rows, int64_t n, int64_t ldy, const float* bias, EpilogueActivation act) {
  const ActivationRowFn row = activation_row(act);
  at::parallel_for(0, rows, grain_rows(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) row(y + r * ldy, n, bias);
  });
}

void bias_residual_layer_norm_rows(float* y, int64_t ldy, const float* residual, int64_t ldr, const float* bias,
                                   const float* gamma, const float* beta, int64_t rows, int64_t n, float eps) {
  const LayerNormRowFn row = layer_norm_row();
  at::parallel_for(0, rows, grain_rows(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) row(y + r * ldy, residual + r * ldr, bias, gamma, beta, n, eps);
  });
}

}  // namespace hp::core
