#include "gates/head_gates.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/errors.h"  // ConfigError, HP_CHECK

namespace hp::gates {

void validate_gate_config(const core::GateConfig& cfg, int layers, int heads) {
  HP_CHECK(layers > 0 && heads > 0, "HeadGates needs L, H > 0, got " << layers << " x " << heads);
  if (!(cfg.beta > 0.0 && cfg.beta <= 1.0))
    throw_bad_value("gates.beta", cfg.beta, "must be in (0, 1]", "Voita et al. use 0.33, Louizos et al. and CoFi 2/3");
  if (!(cfg.gamma < 0.0))
    throw_bad_value("gates.gamma", cfg.gamma, "must be < 0 (P(g = 0) > 0 needs it)", "Louizos et al. use -0.1");
  if (!(cfg.zeta > 1.0))
    throw_bad_value("gates.zeta", cfg.zeta, "must be > 1 (P(g = 1) > 0 needs it)", "Louizos et al. use 1.1");
  if (!std::isfinite(cfg.log_alpha_init))
    throw_bad_value("gates.log_alpha_init", cfg.log_alpha_init, "must be finite", "use e.g. 2.0 (P(open) = 0.94)");
  if (!(cfg.lambda >= 0.0) || !std::isfinite(cfg.lambda))
    throw_bad_value("gates.lambda", cfg.lambda, "must be >= 0", "use e.g. 0.01 (a sum over heads)");
  if (!(cfg.lr > 0.0) || !std::isfinite(cfg.lr)) throw_bad_value("gates.lr", cfg.lr, "must be > 0", "use e.g. 0.1");
  // The target controller's (gates/target_controller.cpp checks them again): here too, so that a training run
  // is refused before its folder is written.
  if (!(cfg.target_warmup_ratio >= 0.0 && cfg.target_warmup_ratio <= 1.0))
    throw_bad_value("gates.target_warmup_ratio", cfg.target_warmup_ratio, "must be in [0, 1]", "use e.g. 0.5");
  if (!(cfg.lagrangian_lr > 0.0) || !std::isfinite(cfg.lagrangian_lr))
    throw_bad_value("gates.lagrangian_lr", cfg.lagrangian_lr, "must be > 0", "use e.g. 0.01");
  const int total = layers * heads;
  if (cfg.target_heads < 0 || cfg.target_heads > total)
    throw_bad_value("gates.target_heads", cfg.target_heads, "model has " + std::to_string(total) + " heads",
                    "use 1.." + std::to_string(total) + ", or 0 for plain L0");
}

HeadGates::HeadGates(const core::GateConfig& cfg, int layers, int heads) : cfg_(cfg), layers_(layers), heads_(heads) {
  validate_gate_config(cfg, layers, heads);
  // No init noise: see the header (symmetry is broken by the per-head u; no RNG draws here).
  log_alpha_ = torch::full({layers, heads}, cfg.log_alpha_init, torch::kFloat32).requires_grad_(true);
}

torch::Tensor& HeadGates::log_alpha() { return log_alpha_; }
const torch::Tensor& HeadGates::log_alpha() const { return log_alpha_; }

void HeadGates::to(const torch::Device& device) {
  if (log_alpha_.device() != device) log_alpha_ = log_alpha_.detach().to(device).requires_grad_(true);
}

torch::Tensor HeadGates::sample(long batch) const {
  const auto opts = log_alpha_.options().requires_grad(false);
  if (cfg_.per_example && batch > 0) {
    // u: [B, L, H] broadcast against log α [L, H] → gates [B, L, H].
    const torch::Tensor u = hard_concrete_noise({batch, layers_, heads_}, opts);
    return hard_concrete_sample(log_alpha_, cfg_.beta, limits(), u);
  }
  const torch::Tensor u = hard_concrete_noise({layers_, heads_}, opts);
  return hard_concrete_sample(log_alpha_, cfg_.beta, limits(), u);  // [L, H]
}

torch::Tensor HeadGates::deterministic() const { return hard_concrete_mean(log_alpha_, limits()); }

torch::Tensor HeadGates::expected_open() const { return l0_expected(log_alpha_, cfg_.beta, limits()).sum(); }

torch::Tensor HeadGates::l0_penalty() const { return cfg_.lambda * expected_open(); }

core::HeadSet HeadGates::top_n(int n) const {
  const int total = layers_ * heads_;
  if (n < 0 || n > total) {
    throw ConfigError("HeadGates::top_n: n = " + std::to_string(n) + ", model has " + std::to_string(total) +
                      " heads; use 0.." + std::to_string(total));
  }
  const torch::Tensor la = log_alpha_.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  HP_CHECK(torch::isfinite(la).all().item<bool>(), "log α holds NaN or Inf");
  const double* v = la.data_ptr<double>();
  // Flat index l·H + h, so a stable sort by descending log α breaks ties by layer, then head.
  std::vector<int> order(total);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [v](int a, int b) { return v[a] > v[b]; });
  core::HeadSet keep(layers_, std::vector<bool>(heads_, false));
  for (int i = 0; i < n; ++i) keep[order[i] / heads_][order[i] % heads_] = true;
  return keep;
}

}  // namespace hp::gates
