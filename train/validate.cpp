// The range checks of a training run's config (see train/trainer.h): every train.* key and the gate keys the
// trainer reads, before any folder is written.
#include <cmath>
#include <string>

#include "core/base/errors.h"  // ConfigError
#include "core/base/strings.h"  // format_number
#include "gates/head_gates.h"  // validate_gate_config
#include "gates/structure_gates.h"  // validate_structure_gates
#include "train/trainer.h"

namespace hp::train {

void check_budget_model(const core::GateConfig& gates, const core::BertConfig& arch) {
  if (arch.slimmed())
    throw ConfigError(
        "gates.target_flops / target_params on a slimmed model (its config.json has pruned_heads or "
        "intermediate_sizes): the budget is a fraction of the unpruned encoder; start from the unpruned "
        "model, or prune it further by --target-heads");
  gates::validate_structure_gates(gates, arch.intermediate_size);
}

void validate_train_config(const core::TrainConfig& t, const core::GateConfig& g, int total_heads) {
  auto num = [](double v) { return core::format_number("%g", v); };
  need(t.epochs >= 1 || t.max_steps > 0,
       "train.epochs = " + std::to_string(t.epochs) + " with train.max_steps = 0; use epochs >= 1 or max_steps > 0");
  need(t.max_steps >= 0, "train.max_steps = " + std::to_string(t.max_steps) + "; use 0 (off) or a positive count");
  need(t.lr_peak > 0 && std::isfinite(t.lr_peak),
       "train.lr_peak = " + num(t.lr_peak) + "; use a positive rate, e.g. 5e-5");
  need(t.precision == "auto" || t.precision == "fp32" || t.precision == "bf16",
       "train.precision = '" + t.precision + "'; use auto, fp32 or bf16");
  need(t.batch_size >= 1,
       "train.batch_size = " + std::to_string(t.batch_size) + "; use a positive batch size, e.g. 32");
  need(t.lr_warmup_ratio >= 0 && t.lr_warmup_ratio < 1,
       "train.lr_warmup_ratio = " + num(t.lr_warmup_ratio) + "; use a fraction in [0, 1), e.g. 0.1");
  need(t.weight_decay >= 0, "train.weight_decay = " + num(t.weight_decay) + "; use >= 0, e.g. 0.01");
  need(t.adam_beta1 >= 0 && t.adam_beta1 < 1, "train.adam_beta1 = " + num(t.adam_beta1) + "; use [0, 1), e.g. 0.9");
  need(t.adam_beta2 >= 0 && t.adam_beta2 < 1, "train.adam_beta2 = " + num(t.adam_beta2) + "; use [0, 1), e.g. 0.999");
  need(t.adam_eps > 0, "train.adam_eps = " + num(t.adam_eps) + "; use a small positive value, e.g. 1e-8");
  need(t.grad_clip >= 0, "train.grad_clip = " + num(t.grad_clip) + "; use 0 (off) or a positive norm, e.g. 1.0");
  need(t.eval_every >= 0,
       "train.eval_every = " + std::to_string(t.eval_every) + "; use 0 (each epoch) or a step count");
  need(t.save_every >= 0,
       "train.save_every = " + std::to_string(t.save_every) + "; use 0 (each evaluation) or a step count");
  need(t.max_train_examples >= 0,
       "train.max_train_examples = " + std::to_string(t.max_train_examples) + "; use 0 (all) or a positive count");
  need(g.distill_weight >= 0 && g.distill_weight <= 1,
       "gates.distill_weight = " + num(g.distill_weight) + "; use a weight in [0, 1], e.g. 0.5");
  need(g.distill_temperature > 0,
       "gates.distill_temperature = " + num(g.distill_temperature) + "; use a positive temperature, e.g. 2");
  need(g.distill_augment >= 0 && g.distill_augment <= 1,
       "gates.distill_augment = " + num(g.distill_augment) +
           "; it is the probability a word of an augmented row is swapped: 0 (off) or in (0, 1], e.g. 0.4");
  need(g.target_heads >= 0 && g.target_heads <= total_heads,
       "gates.target_heads = " + std::to_string(g.target_heads) + ", model has " + std::to_string(total_heads) +
           " heads; use 1.." + std::to_string(total_heads) + " (or 0 for no target)");
  for (const auto& [key, v] :
       {std::pair{"gates.target_flops", g.target_flops}, {"gates.target_params", g.target_params}})
    need(v == 0 || (v > 0 && v < 1),
         std::string(key) + " = " + num(v) + "; use a fraction of the encoder to keep in (0, 1), e.g. 0.5, or 0 (off)");
  need((g.target_heads > 0) + (g.target_flops > 0) + (g.target_params > 0) <= 1,
       "more than one of gates.target_heads, target_flops and target_params is set; give one target");
  need(!g.layer_gates || g.target_flops > 0 || g.target_params > 0,
       "gates.layer_gates = true without gates.target_flops or target_params: the layer gates join the FFN and "
       "sublayer gates of a budget; give --target-flops F (or drop the key)");
  need(!g.hidden_gates || g.target_flops > 0 || g.target_params > 0,
       "gates.hidden_gates = true without gates.target_flops or target_params: the hidden gates join the FFN and "
       "sublayer gates of a budget; give --target-flops F (or drop the key)");
  need(g.finetune_epochs >= 1 || !g.finetune_after ||
           (g.target_heads == 0 && g.target_flops == 0 && g.target_params == 0),
       "gates.finetune_epochs = " + std::to_string(g.finetune_epochs) + "; use >= 1, or gates.finetune_after: false");
  // The gates' own ranges too, so that a run with bad gates is refused before its folder is written (the
  // gates are built later, inside the loop); only the total head count enters these checks.
  if (g.enabled || g.target_heads > 0 || g.target_flops > 0 || g.target_params > 0)
    gates::validate_gate_config(g, 1, total_heads);
}

}  // namespace hp::train
