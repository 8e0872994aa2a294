// The int8 arithmetic of the inference linears (core/kernels/lowp_gemm.h), torch-free: weights quantised
// once per output channel, activations quantised per row on the fly, and the pass that turns the int32
// GEMM result back into float32. Each has AVX-512, AVX2 and portable paths doing the same float operations
// in the same order (core/kernels/isa.h picks; tests run every path the CPU has).
//
// Weights, symmetric s8 per output channel n (row n of W [N, K]), in ±Q with Q = 127 or 63:
//   s_n = max_k |w_nk| / Q (1 when the row is all zero),  q_nk = clamp(rne(w_nk / s_n), −Q, Q).
//   Q = 63 where the GEMM adds two u8·s8 products in a saturating int16 before the int32 sum (AVX2 and AVX-512
//   without VNNI, vpmaddubsw; ONNX Runtime's AVX2 kernel too): |q_mk q_nk + q_m,k+1 q_n,k+1| ≤ 255 · 63 · 2 =
//   32130 < 32767, so every pair sum is exact, while at Q = 127 it reaches 64770 and saturates
//   (core/kernels/lowp_gemm.h chooses Q; the int8 ONNX export always uses 63).
// Activations, asymmetric u8 per row m of X [M, K] (ONNX Runtime's dynamic scheme, per row):
//   lo = min(0, min_k x_mk), hi = max(0, max_k x_mk),  s_m = (hi − lo) / 255 (1 when hi = lo),
//   z_m = clamp(rne(−lo / s_m), 0, 255),  q_mk = clamp(rne(x_mk · (1 / s_m)) + z_m, 0, 255).
//   0 is represented exactly; rne is round-half-to-even. A row holding NaN or ±inf gets s_m = NaN, so its
//   outputs are NaN as in float32 (never a silently finite number).
// Product: y_mn = s_m · s_n · (Σ_k q_mk q_nk − z_m · Σ_k q_nk).
// Error bound of one output against the float32 product (rounding of both operands, fp32 slack aside):
//   |y_mn − x_m·w_n| ≤ (s_m / 2) · ‖w_n‖₁ + (s_n / 2) · ‖x_m‖₁ + K · s_m · s_n / 4,
// where s_n is twice as large at Q = 63 as at 127 (the weights' share of the error doubles).
#pragma once

#include <cstdint>
#include <functional>

namespace hp::core::quant {

// Per output channel in ±qmax (127 or 63): q [N, K] row-major, scale [N], colsum [N] = Σ_k q_nk.
void quantize_weight_rows(const float* w, int64_t N, int64_t K, int8_t* q, float* scale, int32_t* colsum,
                          int qmax = 127);

// Per row of x [M, K] (row stride ldx): q [M, K] (row stride K), scale [M], zero [M]. Rows in parallel.
// With `col_mul` [K], row m quantised is x_mk · col_mul_k (one float32 product per element, before the range is
// taken): the inverse smoothing factors of a calibrated linear (SmoothQuant; core/kernels/lowp_gemm.h).
void quantize_activation_rows(const float* x, int64_t ldx, int64_t M, int64_t K, uint8_t* q, float* scale,
                              int32_t* zero, const float* col_mul = nullptr);

// y[m, n] = (accumulate ? y[m, n] : 0) + (s_m · s_n) · (c[m, n] − z_m · colsum_n), rows in parallel. c may alias y
// (same buffer, same stride) when not accumulating.
// `after(begin, end)`, when given, runs on each thread's rows once that thread has converted them (the bias,
// activation or LayerNorm pass of core/kernels/epilogue.h), without a parallel region of its own. (Smaller blocks,
// 32 KB to 1 MB of output at a time so that the pass finds them in cache, measured no faster on Zen 4.)
void dequantize_rows(const int32_t* c, int64_t ldc, float* y, int64_t ldy, int64_t M, int64_t N,
                     const float* row_scale, const int32_t* row_zero, const float* col_scale, const int32_t* colsum,
                     bool accumulate, const std::function<void(int64_t, int64_t)>& after = {});

// float32 → bf16 bits (round to nearest even; NaN stays a quiet NaN; subnormals kept), rows of x [M, K]
// (row stride ldx) into y [M, K] contiguous, rows in parallel.
void to_bf16_rows(const float* x, int64_t ldx, int64_t M, int64_t K, uint16_t* y);
uint16_t to_bf16(float v);
float bf16_to_float(uint16_t v);

}  // namespace hp::core::quant
