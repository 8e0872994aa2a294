// The GEMM of the inference linears. Debian's LibTorch links oneDNN (libdnnl.so.2); its JIT sgemm is
// 10-20% faster than OpenBLAS at BERT's shapes on AVX-512 (bench/README.md), so the no-grad forward
// calls it directly through dlopen. Where the library or its symbol is missing, ATen's addmm_ (the
// BLAS checked by core/kernels/blas.h) does the same product. Training keeps torch::linear;
// eval-mode autograd takes linear_frozen.
#pragma once

#include <torch/types.h>

#include <string>

namespace hp::core {

// out[rows, N] += x[rows, K] · wᵀ with w [N, K]. float32; x and out 2-D with unit column stride.
void accumulate_linear(torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& w);
// out[rows, N] = x[rows, K] · wᵀ (out's old contents are ignored); the same conditions.
void matmul_nt(torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& w);

// x · wᵀ + b over the last dimension of x (any leading shape), through accumulate_linear.
torch::Tensor linear_no_grad(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);

// x · wᵀ + b where only x takes gradients (eval-mode criteria, the analysis backward): the same GEMM
// forward as linear_no_grad and the input gradient dy · w through it too. Falls back to torch::linear
// when w or b needs a gradient (training) or x is not a float32 CPU tensor; without grad mode (or when
// x needs none) it is linear_no_grad.
torch::Tensor linear_frozen(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);

// dy · w over the last dimension, the input gradient of x · wᵀ: dy [..., N], w [N, K] → [..., K], through
// the same GEMM.
torch::Tensor linear_input_grad(const torch::Tensor& dy, const torch::Tensor& w);

// "oneDNN 2.6.3 sgemm" or "ATen addmm (BLAS)"; for --version and benchmarks.
std::string gemm_backend();
// Benchmarks switch oneDNN off to compare with the BLAS.
void set_onednn_gemm_enabled(bool enabled);

}  // namespace hp::core
