// Hard-Concrete gates on every prunable structure of the encoder, as CoFi (Xia, Zhong, Chen, ACL 2022, §3):
// one gate per head (gates/head_gates.h), one per FFN intermediate neuron or group of neurons, and — the coarse
// masks — one per attention sublayer and one per FFN sublayer, multiplied with the fine ones. The constraint of
// a budget target is the EXPECTED cost under the gates' open probabilities (P(g ≠ 0), Louizos et al. eq. 12):
//
//   E[cost] = Σ_l  P(layer_l) · [ P(mha_l) · Σ_h P(head_lh) · c_head  +  P(ffn_l) · Σ_j P(group_lj) · g · c_neuron ]
//
// The layer gates (gates.layer_gates; P(layer_l) = 1 without them) are one more coarse mask, on the whole layer:
// the forward mixes the layer with the identity, x + z_l · (layer_l(x) − x) (core/model/bert.h's layer mask), so a
// closed one removes the layer's LayerNorms too, which closing both sublayers does not; its units' costs go with it.
//
// The hidden gates (gates.hidden_gates) are one gate per hidden channel, shared by every layer (CoFi's z_hidden;
// core/model/bert.h's hidden mask). Every head's projections and every neuron's weights are as wide as the hidden
// dimension, so their costs scale with the expected fraction of channels open, r = Σ_c P(hidden_c) / D:
// c_head → c_head − c_head_hidden · (1 − r), c_neuron → c_neuron · r (UnitCosts::at_hidden), E[cost] being
// linear in r for fixed unit probabilities (the gates are independent).
//
// with the unit costs of the retraining-free search (eval/flops.h: FLOPs at the task's mean length, or
// parameters), so a gated run and the search spend one budget. CoFi counts parameters the same way (its
// expected size multiplies the coarse and fine open probabilities); the FLOPs form is the same sum with FLOP
// costs per unit. The Lagrangian that holds E[cost] at the target: gates/target_controller.h.
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

#include "core/base/config.h"  // GateConfig
#include "core/model/head_mask.h"  // StructureMask, UnitCosts
#include "gates/head_gates.h"

namespace hp::gates {

// Gate values as the forward takes them (EncoderInput::head_mask, neuron_mask): heads [L, H] (or [B, L, H]
// with per-example head gates), neurons [L, I] — undefined without neuron gates.
struct GateMasks {
  torch::Tensor heads, neurons;
  torch::Tensor layers = {};  // [L] (EncoderInput::layer_mask); undefined without layer gates
  torch::Tensor hidden = {};  // [D] (EncoderInput::hidden_mask); undefined without hidden gates
};

class StructureGates {
 public:
  // Head gates always (HeadGates, with its checks). With `neurons` = I > 0 also FFN gates in groups of
  // cfg.neuron_group (which must divide I) and, with cfg.sublayer_gates, the two coarse gates per layer.
  // ConfigError naming the key for a bad neuron_group, or per_example with neuron gates.
  // With cfg.hidden_gates and `hidden` = D > 0 (and neuron gates) also one gate per hidden channel.
  StructureGates(const core::GateConfig& cfg, int layers, int heads, int neurons = 0, int hidden = 0);

  HeadGates& heads() { return heads_; }
  const HeadGates& heads() const { return heads_; }
  bool has_neurons() const { return neuron_la_.defined(); }
  bool has_sublayers() const { return mha_la_.defined(); }
  bool has_layers() const { return layer_la_.defined(); }
  bool has_hidden() const { return hidden_la_.defined(); }
  int layers() const { return heads_.layers(); }
  int neurons() const { return neurons_; }  // I; 0 without neuron gates
  int group() const { return group_; }

  // Moves every log α to `device` (new leaves: before an optimizer holds them), so that a GPU run samples its gates
  // there and copies nothing per step; keep_within and keep_hidden read a CPU copy.
  void to(const torch::Device& device);

  // Every log α, in a fixed order: heads [L, H], then neuron groups [L, I/g], attention [L], FFN [L] sublayers,
  // layers [L], hidden channels [D].
  std::vector<torch::Tensor> parameters() const;
  // The same by name ("log_alpha", "neuron_log_alpha", "mha_log_alpha", "ffn_log_alpha", "layer_log_alpha",
  // "hidden_log_alpha") for checkpoints and
  // run state; load() copies such a map back (CheckpointError naming a missing or misshapen entry).
  std::map<std::string, torch::Tensor> named() const;
  void load(const std::map<std::string, torch::Tensor>& saved);

  // Training gates from the global torch RNG: the head draw first (exactly HeadGates::sample, so head-only
  // runs keep their random stream), then neuron groups, then the sublayers, then the layers, then the hidden channels. The sublayer gates
  // multiply the fine ones; a neuron group's gate is repeated over its g neurons; the layer gates are apart.
  GateMasks sample(long batch) const;
  // Test-time gates (eq. 13), the same products.
  GateMasks deterministic() const;

  // E[cost] above: a differentiable scalar (float64). Head-only gates (no `neurons` given) count the heads alone.
  torch::Tensor expected_cost(const core::UnitCosts& costs) const;

  // The deterministic structure that spends at most `budget`: every unit is scored by its open probability
  // times its sublayer's and layer's (P(unit) · P(sublayer) · P(layer), float64), and the units are taken in
  // decreasing score (ties in index order, heads before neurons), each one that still fits. It lands below the
  // budget by less than the cheapest unit not taken (a neuron group) unless every unit fits. With layer gates, a
  // layer whose test-time gate is 0 is removed (`layers`) and none of its units taken. With hidden gates the
  // channels are chosen first: the round(Σ_c P(hidden_c)) most probable (at least one), as CoFi fixes its
  // z_hidden; the units are then costed at that width. Head-only gates: heads only, neurons empty.
  core::StructureMask keep_within(const core::UnitCosts& costs, double budget) const;

  // Per-layer summaries of P(g ≠ 0) for run.h5: the mean over a layer's neuron groups, and the coarse gates'
  // (each [L]; undefined without them).
  torch::Tensor neuron_p_open_by_layer() const;
  torch::Tensor mha_p_open() const;
  torch::Tensor ffn_p_open() const;
  torch::Tensor layer_p_open() const;
  torch::Tensor hidden_p_open() const;  // [D]
  // The hidden channels keep_within keeps (empty without hidden gates or when it keeps them all).
  std::vector<bool> keep_hidden() const;

 private:
  torch::Tensor p_open(const torch::Tensor& la) const;
  StructureGates on_cpu() const {  // a copy whose log α are on the CPU
    StructureGates c = *this;
    c.to(torch::kCPU);
    return c;
  }
  core::GateConfig cfg_;
  HeadGates heads_;
  int neurons_ = 0, group_ = 1;
  torch::Tensor neuron_la_;  // [L, I/g]
  torch::Tensor mha_la_, ffn_la_;  // [L]
  torch::Tensor layer_la_;  // [L]
  torch::Tensor hidden_la_;  // [D]
};

// The checks of StructureGates' constructor for an FFN of `neurons`: gates.neuron_group divides it, no per-example
// gates. ConfigError naming the key.
void validate_structure_gates(const core::GateConfig& cfg, int neurons);

}  // namespace hp::gates
