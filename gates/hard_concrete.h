// Hard-Concrete gates: Louizos, Welling, Kingma 2018, "Learning Sparse Neural Networks through L0
// Regularization", §4.1 / eq. 10 (sample, stretch, clip), eq. 12 (P(g ≠ 0)) and eq. 13 (test-time
// gate), as used on attention heads by Voita et al. 2019. Stateless tensor math only: the module
// owning log α is gates/head_gates.h; the exact-N Lagrangian is gates/target_controller.h.
#pragma once

#include <torch/types.h>

namespace hp::gates {

// The stretch interval (γ, ζ) with γ < 0 < 1 < ζ, so that clipping puts mass at exactly 0 and 1.
struct StretchLimits {
  double gamma = -0.1;
  double zeta = 1.1;
};

// Uniform noise for hard_concrete_sample: u ~ U(eps, 1 - eps), drawn from the global torch RNG of
// `options`' device. eps = 1e-6 as in Voita et al.'s code: keeps log u and log(1 - u) finite.
constexpr double kNoiseEps = 1e-6;
torch::Tensor hard_concrete_noise(at::IntArrayRef sizes, const torch::TensorOptions& options);

// Louizos et al. eq. 10: s = σ((log u − log(1−u) + log α)/β), g = clip(s(ζ−γ)+γ, 0, 1).
// u: same shape as log_alpha or broadcastable with it; the result has the broadcast shape.
// Differentiable w.r.t. log_alpha (the clip passes no gradient where g is exactly 0 or 1).
torch::Tensor hard_concrete_sample(const torch::Tensor& log_alpha, double beta, StretchLimits lim,
                                   const torch::Tensor& u);

// Deterministic test-time gate (eq. 13): clip(σ(log α)(ζ−γ)+γ, 0, 1), elementwise. Not exactly 0/1
// for |log α| < log((1−γ)/(ζ−1)) (2.40 at the defaults); use HeadGates::top_n for a hard set.
torch::Tensor hard_concrete_mean(const torch::Tensor& log_alpha, StretchLimits lim);

// P(g ≠ 0) = σ(log α − β log(−γ/ζ)), elementwise (eq. 12). Needs γ < 0.
torch::Tensor l0_expected(const torch::Tensor& log_alpha, double beta, StretchLimits lim);

}  // namespace hp::gates
