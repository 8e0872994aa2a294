// One Hard-Concrete gate per attention head with the L0 penalty (Voita et al. 2019, "Analyzing
// Multi-Head Self-Attention", sec. 4; Louizos et al. 2018 eqs. 10, 12, 13). A thin owner of log α
// [L, H]: the math is gates/hard_concrete.h, the exact-N Lagrangian gates/target_controller.h, and
// the model applies the gate tensor as its head mask (core/model/bert.h).
#pragma once

#include <torch/types.h>

#include "core/base/config.h"  // GateConfig
#include "core/model/head_mask.h"  // HeadSet
#include "gates/hard_concrete.h"

namespace hp::gates {

// Choices and how they relate to the papers:
// - λ (cfg.lambda) multiplies the SUM over all L·H heads of P(g ≠ 0). Voita et al.'s code
//   (the-story-of-heads, ConcreteGate.get_penalty + ConcreteProblem) adds, per gated attention
//   module, Σ_h P(g_h ≠ 0) over that module's heads, then takes the MEAN over the M gated modules
//   before multiplying by concrete_coef. So λ_voita = λ_ours × M, where M is the number of gated
//   attention modules (= L for a BERT encoder), not the number of heads (that would be their
//   per-head mean, which their code does not take). E.g. our default 0.01 on a 6-layer encoder is
//   their 0.06.
// - β (cfg.beta) is the Concrete temperature: smaller β puts more mass at exactly 0 and 1 (closer
//   to a binary gate, noisier gradients). 0.33 is Voita et al.'s (and ConcreteGate's) default;
//   Louizos et al. and CoFi use 2/3. As β → 0, P(g ≠ 0) → σ(log α).
// - log α starts at cfg.log_alpha_init for every head, with no noise: sampling draws independent u
//   per head, which breaks the symmetry from the first step, and constructing the gates consumes
//   no random numbers (so the seed's stream for dropout and shuffling is the same with gates on or
//   off). At the default 2.0 with β = 0.33: P(g ≠ 0) = σ(2 + 0.33 ln 11) = 0.942, P(g = 1) =
//   0.770, and the deterministic gate is 0.957 (it reaches exactly 1 only for log α ≥ ln 11 =
//   2.40). A larger init (3.0: deterministic gate 1, P(g = 1) = 0.90) starts from the exact
//   unpruned model but leaves g strictly inside (0, 1), where task gradients reach log α, on only
//   8% of samples instead of 17%.
class HeadGates {
 public:
  // Validates cfg (beta, gamma, zeta, lambda, lr, log_alpha_init, target_heads against L·H);
  // throws ConfigError naming the key. log α: [L, H] float32 on the CPU, requires_grad.
  HeadGates(const core::GateConfig& cfg, int layers, int heads);

  // log α: [L, H], a leaf with requires_grad. Hand it to the optimizer; replace it (same shape) to
  // move it to a device or to restore it on resume.
  torch::Tensor& log_alpha();
  const torch::Tensor& log_alpha() const;
  // Moves log α to `device` (a new leaf; before an optimizer holds it). The noise is then drawn there.
  void to(const torch::Device& device);

  // Training gates from the global torch RNG (of log α's device): [L, H], one sample for the whole
  // batch; [B, L, H] with one sample per example when cfg.per_example and batch > 0.
  torch::Tensor sample(long batch) const;

  // Test-time gate (eq. 13), [L, H], differentiable; values strictly inside (0, 1) are possible.
  torch::Tensor deterministic() const;

  // Σ_h P(g_h ≠ 0): scalar (log α's dtype), differentiable; the expected number of open heads.
  torch::Tensor expected_open() const;

  // cfg.lambda * expected_open(): the plain L0 term added to the loss.
  torch::Tensor l0_penalty() const;

  // Exactly n heads kept: the n largest log α; ties go to the lower layer, then the lower head.
  // n outside 0..L·H → ConfigError.
  core::HeadSet top_n(int n) const;

  const core::GateConfig& config() const { return cfg_; }
  StretchLimits limits() const { return {cfg_.gamma, cfg_.zeta}; }
  int layers() const { return layers_; }
  int heads() const { return heads_; }

 private:
  core::GateConfig cfg_;
  int layers_;
  int heads_;
  torch::Tensor log_alpha_;  // [L, H]
};

// Throws ConfigError naming the first bad gates.* key (the checks HeadGates' constructor runs).
void validate_gate_config(const core::GateConfig& cfg, int layers, int heads);

}  // namespace hp::gates
