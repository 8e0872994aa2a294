#include "gates/hard_concrete.h"

#include <cmath>

namespace hp::gates {

namespace {

void check_limits(StretchLimits lim, const char* where) {
  TORCH_CHECK(lim.gamma < 0.0 && lim.zeta > 1.0, where, ": stretch limits need γ < 0 and ζ > 1, got γ = ", lim.gamma,
              ", ζ = ", lim.zeta);
}

}  // namespace

torch::Tensor hard_concrete_noise(at::IntArrayRef sizes, const torch::TensorOptions& options) {
  // Affine map instead of clamp: keeps the density uniform on (eps, 1 - eps) (no atoms at the
  // ends).
  return torch::rand(sizes, options) * (1.0 - 2.0 * kNoiseEps) + kNoiseEps;
}

torch::Tensor hard_concrete_sample(const torch::Tensor& log_alpha, double beta, StretchLimits lim,
                                   const torch::Tensor& u) {
  TORCH_CHECK(beta > 0.0, "hard_concrete_sample: β must be > 0, got ", beta);
  check_limits(lim, "hard_concrete_sample");
  // log u − log(1−u) is a standard Logistic(0, 1) draw; log1p keeps 1 − u accurate near u = 0.
  const torch::Tensor logistic = torch::log(u) - torch::log1p(-u);
  const torch::Tensor s = torch::sigmoid((logistic + log_alpha) / beta);
  return torch::clamp(s * (lim.zeta - lim.gamma) + lim.gamma, 0.0, 1.0);
}

torch::Tensor hard_concrete_mean(const torch::Tensor& log_alpha, StretchLimits lim) {
  check_limits(lim, "hard_concrete_mean");
  return torch::clamp(torch::sigmoid(log_alpha) * (lim.zeta - lim.gamma) + lim.gamma, 0.0, 1.0);
}

torch::Tensor l0_expected(const torch::Tensor& log_alpha, double beta, StretchLimits lim) {
  TORCH_CHECK(beta > 0.0, "l0_expected: β must be > 0, got ", beta);
  check_limits(lim, "l0_expected");
  // P(g = 0) = P(s ≤ −γ/(ζ−γ)) = σ(β log(−γ/ζ) − log α); its complement is below.
  return torch::sigmoid(log_alpha - beta * std::log(-lim.gamma / lim.zeta));
}

}  // namespace hp::gates
