// Exact-N head target: the Lagrangian sparsity term of CoFi pruning (Xia, Zhong, Chen 2022, after
// Wang, Wohlwend, Lei 2020), penalty = λ1 (ŝ − t) + λ2 (ŝ − t)², minimised over log α and maximised
// over λ1, λ2 (gradient ascent), with ŝ the expected number of open heads (gates/head_gates.h) and
// t a target that falls linearly from all heads to cfg.target_heads. Fixing the final N heads:
// HeadGates::top_n.
#pragma once

#include <torch/types.h>

#include "core/base/config.h"  // GateConfig

namespace hp::gates {

// Units and sign conventions:
// - ŝ and t are head counts (not CoFi's sparsity fractions), so λ1 is "loss per head", and each
//   update moves λ1 by lagrangian_lr × (heads off target). CoFi moves λ with AdamW (negative lr),
//   which hides the units; plain ascent does not, so lagrangian_lr is per head here.
// - The penalty pushes ŝ toward t from both sides: ascent grows λ1 while ŝ > t (∂penalty/∂ŝ = λ1
//   > 0 closes heads) and shrinks it, down through 0 to negative values, while ŝ < t (then λ1 < 0
//   opens heads). λ2 only grows (its gradient (ŝ − t)² ≥ 0): a quadratic pull toward t from both
//   sides whose stiffness rises the longer ŝ stays off target.
class TargetController {
 public:
  // Needs 1 <= cfg.target_heads <= total_heads (0 is plain L0 mode: build no controller),
  // cfg.target_warmup_ratio in [0, 1] and cfg.lagrangian_lr > 0; otherwise ConfigError.
  // λ1 = λ2 = 0 at the start.
  TargetController(const core::GateConfig& cfg, int total_heads, long total_steps);
  // Any constrained quantity (a FLOPs or parameter target: percent of the encoder's cost kept, so that
  // lagrangian_lr is per percent): the target falls linearly from `start` to `target` over the warm-up.
  TargetController(const core::GateConfig& cfg, double start, double target, long total_steps);

  // Target head count at `step`: total_heads at step 0, falling linearly to cfg.target_heads at
  // step cfg.target_warmup_ratio * total_steps, constant after.
  double target(long step) const;

  // λ1 (ŝ − t) + λ2 (ŝ − t)²: scalar, differentiable w.r.t. expected_open (a scalar tensor);
  // the multipliers are constants here.
  torch::Tensor penalty(const torch::Tensor& expected_open, long step) const;

  // Gradient ascent after backward: λ1 += lr (ŝ − t), λ2 += lr (ŝ − t)², lr = cfg.lagrangian_lr. The multipliers
  // live on ŝ's device and are updated there: the training step reads nothing back to the host.
  void update(const torch::Tensor& expected_open, long step);
  void update(double expected_open, long step) { update(torch::tensor(expected_open, torch::kFloat64), step); }

  // [λ1, λ2], float64 [2], a copy on the multipliers' device (for a log read later); lambda1/2: host reads.
  torch::Tensor multipliers() const { return lambda_.clone(); }
  double lambda1() const { return lambda_[0].item<double>(); }
  double lambda2() const { return lambda_[1].item<double>(); }
  double start() const { return total_heads_; }
  long warmup_steps() const { return warmup_steps_; }

  // Resume state: [λ1, λ2], float64 [2]. load_state throws CheckpointError on another shape.
  torch::Tensor state() const;
  void load_state(const torch::Tensor& s);

 private:
  double lr_;
  double total_heads_;  // the quantity at step 0 (all heads, or 100%)
  double target_heads_;
  long warmup_steps_;
  torch::Tensor lambda_ = torch::zeros({2}, torch::kFloat64);  // [λ1, λ2]
};

}  // namespace hp::gates
