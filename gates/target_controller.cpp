#include "gates/target_controller.h"

#include <cmath>
#include <sstream>
#include <string>

#include "core/base/errors.h"  // ConfigError, CheckpointError, HP_CHECK
#include "core/kernels/device.h"  // to_device

namespace hp::gates {

namespace {

int checked_heads(const core::GateConfig& cfg, int total_heads) {
  HP_CHECK(total_heads > 0, "TargetController needs total_heads > 0, got " << total_heads);
  if (cfg.target_heads < 1 || cfg.target_heads > total_heads)
    throw_bad_value("gates.target_heads", cfg.target_heads, "the target mode needs 1.." + std::to_string(total_heads),
                    "set it in that range, or 0 and build no TargetController for plain L0");
  return total_heads;
}

}  // namespace

TargetController::TargetController(const core::GateConfig& cfg, int total_heads, long total_steps)
    : TargetController(cfg, checked_heads(cfg, total_heads), cfg.target_heads, total_steps) {}

TargetController::TargetController(const core::GateConfig& cfg, double start, double target, long total_steps)
    : lr_(cfg.lagrangian_lr), total_heads_(start), target_heads_(target) {
  HP_CHECK(total_steps >= 0, "TargetController needs total_steps >= 0, got " << total_steps);
  if (!(cfg.target_warmup_ratio >= 0.0 && cfg.target_warmup_ratio <= 1.0))
    throw_bad_value("gates.target_warmup_ratio", cfg.target_warmup_ratio, "must be in [0, 1]", "use e.g. 0.5");
  if (!(cfg.lagrangian_lr > 0.0) || !std::isfinite(cfg.lagrangian_lr))
    throw_bad_value("gates.lagrangian_lr", cfg.lagrangian_lr, "must be > 0", "use e.g. 0.01");
  warmup_steps_ = std::lround(cfg.target_warmup_ratio * static_cast<double>(total_steps));
}

double TargetController::target(long step) const {
  if (step >= warmup_steps_) return target_heads_;  // also covers warmup_steps_ == 0
  if (step <= 0) return total_heads_;
  const double frac = static_cast<double>(step) / static_cast<double>(warmup_steps_);
  return total_heads_ + (target_heads_ - total_heads_) * frac;
}

torch::Tensor TargetController::penalty(const torch::Tensor& expected_open, long step) const {
  TORCH_CHECK(expected_open.numel() == 1, "TargetController::penalty: expected_open must be a scalar, got ",
              expected_open.sizes());
  const torch::Tensor d = expected_open - target(step);
  // Constants here, in ŝ's precision (on ŝ's device already after the first update).
  const torch::Tensor lambda = core::to_device(lambda_, d.device()).to(d.scalar_type()).detach();
  return lambda[0] * d + lambda[1] * d * d;
}

void TargetController::update(const torch::Tensor& expected_open, long step) {
  torch::NoGradGuard no_grad;
  const torch::Tensor d = expected_open.detach().to(torch::kFloat64).reshape({}) - target(step);
  lambda_ = core::to_device(lambda_, d.device());
  lambda_[0] += lr_ * d;  // d penalty / dλ1
  lambda_[1] += lr_ * d * d;  // d penalty / dλ2 (≥ 0, so λ2 never shrinks)
}

torch::Tensor TargetController::state() const { return lambda_.to(torch::kCPU).clone(); }

void TargetController::load_state(const torch::Tensor& s) {
  if (s.numel() != 2) {
    std::ostringstream os;
    os << "TargetController::load_state: got " << s.numel() << " values, expected 2 (λ1, λ2); "
       << "resume from a state written by the same headprune version";
    throw CheckpointError(os.str());
  }
  lambda_ = s.detach().to(lambda_.device(), torch::kFloat64).reshape({2}).clone();
}

}  // namespace hp::gates
