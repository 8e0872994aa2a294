// AVX-512 epilogues of the inference GEMMs (see core/kernels/epilogue.h).
#include "core/kernels/epilogue.h"

#include <ATen/Parallel.h>

#include <atomic>
#include <cmath>

#include "core/kernels/simd_avx512.h"

namespace hp::core {

namespace {

using simd::exp_ps;
using simd::lanes;

std::atomic<bool> g_enabled{true};

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
HP_AVX512 void bias_activation_row(float* y, int64_t n, const float* bias) {
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

HP_AVX512 void bias_residual_layer_norm_row(float* y, const float* residual, const float* bias, const float* gamma,
                                            const float* beta, int64_t n, float eps) {
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

// Enough rows per task that a task is worth a thread hand-off (~64K elements).
int64_t grain_rows(int64_t n) { return std::max<int64_t>(1, 65536 / std::max<int64_t>(n, 1)); }

}  // namespace

bool epilogue_kernels_available() { return simd::use_avx512() && g_enabled.load(std::memory_order_relaxed); }

void set_epilogue_kernels_enabled(bool enabled) { g_enabled.store(enabled, std::memory_order_relaxed); }

void bias_activation_rows(float* y, int64_t rows, int64_t n, int64_t ldy, const float* bias, EpilogueActivation act) {
  at::parallel_for(0, rows, grain_rows(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      if (act == EpilogueActivation::kRelu) bias_activation_row<EpilogueActivation::kRelu>(y + r * ldy, n, bias);
      else if (act == EpilogueActivation::kNone) bias_activation_row<EpilogueActivation::kNone>(y + r * ldy, n, bias);
      else bias_activation_row<EpilogueActivation::kGeluErf>(y + r * ldy, n, bias);
    }
  });
}

void bias_residual_layer_norm_rows(float* y, int64_t ldy, const float* residual, int64_t ldr, const float* bias,
                                   const float* gamma, const float* beta, int64_t rows, int64_t n, float eps) {
  at::parallel_for(0, rows, grain_rows(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      bias_residual_layer_norm_row(y + r * ldy, residual + r * ldr, bias, gamma, beta, n, eps);
  });
}

}  // namespace hp::core
