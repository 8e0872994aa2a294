// Row-wise passes that follow the inference GEMMs (no autograd, not training), each one read and one
// write of the GEMM's output while ATen would take two or three passes:
// - bias + activation after the FFN input projection (the [tokens, 4·D] intermediate, BERT's largest);
// - bias + residual + LayerNorm after the attention output and the FFN output projections.
// An AVX-512 and an AVX2 + FMA version of each, chosen per call from isa::vector_path() (core/kernels/isa.h),
// like core/kernels/attention_kernel.h; the two round differently (16 or 8 lanes of partial sums; GELU's 1/d
// from rcp14 and a Newton step, or a division) and agree to float32 rounding, not bit for bit. Callers ask
// epilogue_kernels_available() first and otherwise keep the ATen ops (core/model/bert.cpp). Rows are
// processed in parallel (at::parallel_for); each row's arithmetic is fixed, so results do not depend on the
// thread count.
#pragma once

#include <cstdint>

namespace hp::core {

enum class EpilogueActivation { kGeluErf, kRelu, kNone };  // kNone: the bias only

// True when isa::vector_path() is kAvx2 or kAvx512 (the CPU has it and HEADPRUNE_MAX_ISA allows it) and the
// kernels are not disabled by set_epilogue_kernels_enabled(false); false on the scalar path.
bool epilogue_kernels_available();
// Tests and benchmarks switch the kernels off to compare with the ATen ops.
void set_epilogue_kernels_enabled(bool enabled);

// y[r, 0:n) = act(y[r, 0:n) + bias[0:n)) for r < rows; row stride ldy. GELU is the exact erf form,
// as HF's "gelu" (erf by Abramowitz & Stegun 7.1.26, |error| ≤ 1.5e-7, the formula ATen's vectorized
// erf uses). Only valid when epilogue_kernels_available().
void bias_activation_rows(float* y, int64_t rows, int64_t n, int64_t ldy, const float* bias, EpilogueActivation act);

// y[r] = LayerNorm(y[r] + bias + residual[r]) with weight gamma and bias beta over n columns (biased
// variance, 1/sqrt(var + eps), as torch::layer_norm). Row strides ldy and ldr. Only valid when
// epilogue_kernels_available().
void bias_residual_layer_norm_rows(float* y, int64_t ldy, const float* residual, int64_t ldr, const float* bias,
                                   const float* gamma, const float* beta, int64_t rows, int64_t n, float eps);

}  // namespace hp::core
