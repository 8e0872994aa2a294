// The attention core of a BERT layer, ctx = softmax(q kᵀ / √Dh + ext) v, for the two eval-mode paths
// of core/model/bert.cpp (training with attention dropout keeps plain whole-tensor ops there).
//
// All of them run one parallel loop over (batch, head) pairs in which every small GEMM is
// single-threaded. at::bmm instead issues the B·H GEMMs one at a time: at S = 128 each one forks and
// joins all threads inside OpenBLAS (most of the forward time at B=32), and at S ≈ 24 (SST-2) they
// run serially on one core; the autograd path also copied every transposed gradient. With these
// cores attention attribution on SST-2 went from 18.2 s to 16.0 s (prune_bench).
#pragma once

#include <torch/types.h>

#include <utility>

namespace hp::core {

// Inference (no autograd); the same per-pair kernel as the forward of attention_autograd. q: [B, H, Sq,
// Dh], k, v: [B, H, S, Dh] (views of the linears' outputs; a non-unit last stride is copied; Sq ≤ S,
// e.g. only the [CLS] query); ext: [B, 1, 1, S] additive mask. Returns probs [B, H, Sq, S] (undefined
// unless want_probs: writing them costs a pass over B·H·Sq·S floats) and ctx [B, Sq, H, Dh].
// `bf16`: the products with bf16 operands where the kernel has them (AttentionPair::bf16 of
// core/kernels/attention_kernel.h; a model at bf16 or int8), unless the probabilities are wanted.
std::pair<torch::Tensor, torch::Tensor> attention_no_grad(const torch::Tensor& q, const torch::Tensor& k,
                                                          const torch::Tensor& v, const torch::Tensor& ext,
                                                          bool want_probs, bool bf16 = false);

// Differentiable, no dropout. q: [B, Sq, D] (the query projection), kv: [B, S, 2D] (key and value
// projections from one linear, keys first); ext: [B, 1, 1, S] additive mask (not differentiated);
// returns ctx [B, Sq, D] with head h in columns [h·Dh, (h+1)·Dh). Gradients for q and kv come from
// the closed form (dV = Pᵀ dC, dP = dC Vᵀ, dS = P ⊙ (dP − rowsum(dP ⊙ P)), dQ = dS K / √Dh,
// dK = dSᵀ Q / √Dh) in the same per-pair loop and land in the linears' output layout, so no
// transposes are copied; the backward is not itself differentiable. float32; other dtypes, or a BLAS
// without `sgemm_`, take whole-tensor ops.
torch::Tensor attention_autograd(const torch::Tensor& q, const torch::Tensor& kv, const torch::Tensor& ext,
                                 int64_t heads);

// Where attention_backward_no_grad writes the gradients of q, k and v: [B, H, rows, Dh] views (unit last
// stride) into the linears' output layout; dq has Sq rows.
struct AttentionInputGrads {
  torch::Tensor dq, dk, dv;
};

// The backward of attention_no_grad by the same per-pair closed form as attention_autograd, without
// autograd: from dctx [B, Sq, H·Dh] (∂loss/∂context, unit last stride), q [B, H, Sq, Dh], k, v [B, H, S,
// Dh] and the forward's probs [B, H, Sq, S], returns ∂loss/∂probs as [B, H, S, S] (rows past Sq zero),
// and with `grads` writes the gradients of q, k and v there. float32 and a BLAS with `sgemm_` only.
torch::Tensor attention_backward_no_grad(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const torch::Tensor& probs, const torch::Tensor& dctx,
                                         const AttentionInputGrads* grads);

// Given attention probabilities [B, H, Sq, S] (unit last stride; differentiable) and values v [B, S, D]
// (differentiable): ctx [B, Sq, D] = probs v per head. Attention attribution's scaled layer.
torch::Tensor probs_times_values(const torch::Tensor& probs, const torch::Tensor& v);

// softmax(q·kᵀ/√Dh + ext)·v with dropout on the probabilities, [B, H, Sq, Dh], through ATen's
// scaled_dot_product_attention (fused kernels on a GPU) from LibTorch 2.0, else as that composition. The attention
// of an accelerator's training step (core/model/bert.cpp); q, k, v: [B, H, S·, Dh]; ext: additive [B, 1, 1, S].
torch::Tensor sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& ext,
                   double dropout);

}  // namespace hp::core
