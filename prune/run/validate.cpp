// The config of a pruning run checked before any work (see prune/run/validate.h).
#include "prune/run/validate.h"

#include <algorithm>
#include <cmath>

#include "core/base/errors.h"
#include "core/base/log.h"
#include "core/base/strings.h"  // format_number
#include "core/data/file_task.h"
#include "core/data/task_options.h"  // task_load_options
#include "core/dist/distributed.h"
#include "core/io/sentence_model.h"
#include "core/kernels/isa.h"
#include "core/kernels/lowp_gemm.h"
#include "prune/embedding/embedding_run.h"
#include "prune/frontier/frontier_stage.h"
#include "prune/heads/criteria.h"
#include "prune/heads/schedule.h"
#include "prune/run/key_use.h"
#include "prune/stages/budget.h"
#include "prune/stages/layer_drop.h"

namespace hp::prune {

namespace {

// The budget keys: one target at a time, fractions in (0, 1), known structures, a decreasing schedule.
void validate_budget(const core::PruneConfig& p, const core::BertConfig& arch) {
  for (const auto& [key, v] : {std::pair{"target_flops", p.target_flops}, {"target_params", p.target_params}}) {
    need(v == 0 || (v > 0 && v < 1), "prune." + std::string(key) + " = " + core::format_number("%g", v) +
                                         "; use a fraction of the unpruned encoder's in (0, 1), e.g. 0.5 (0 = off)");
  }
  need(p.target_latency >= 0, "prune.target_latency = " + std::to_string(p.target_latency) +
                                  "; use a time in ms at prune.latency_batch x latency_seq (0 = off)");
  need((p.target_flops > 0) + (p.target_params > 0) + (p.target_latency > 0) <= 1,
       "more than one of prune.target_flops, target_params and target_latency is set; give one");
  need(p.latency_batch >= 1, "prune.latency_batch = " + std::to_string(p.latency_batch) + "; use 1 or more");
  need(p.latency_seq >= 0 && p.latency_seq <= arch.max_position_embeddings,
       "prune.latency_seq = " + std::to_string(p.latency_seq) + "; use 1.." +
           std::to_string(arch.max_position_embeddings) + " (the model's positions), or 0 for data.max_seq_len");
  need(!(p.target_latency > 0 && !p.latency),
       "prune.target_latency draws its curves against measured latency; set prune.latency = true");
  need(!(budget_mode(p) && p.target_heads > 0),
       "prune.target_heads and a FLOPs, parameter or latency budget are both set; give --target-heads N or "
       "--target-flops F");
  need(!(p.method == core::MethodKind::kKwon && !budget_mode(p)),
       "prune.method = kwon searches under a budget; give --target-flops F, --target-params F or --target-latency MS");
  need(!(budget_mode(p) && p.method == core::MethodKind::kCriterion),
       "prune.method = " + core::choice_text(p.method) +
           " chooses heads for --target-heads; a FLOPs, parameter or latency budget uses kwon (or gates)");
  need(!(p.method == core::MethodKind::kGates && p.target_latency > 0),
       "prune.method = gates with --target-latency: the gates learn a FLOPs or parameter budget; give --target-flops F "
       "or --target-params F, or prune.method = kwon");
  need(!p.structures.empty(), "prune.structures is empty; use heads, neurons or both (and hidden, layers)");
  bool heads_or_neurons = false;
  std::string other;  // the first of layers and hidden named
  for (const auto& s : p.structures) {
    need(s == "heads" || s == "neurons" || s == "layers" || s == "hidden",
         "prune.structures has '" + s + "'; use heads, neurons or both (and hidden, layers)");
    heads_or_neurons |= s == "heads" || s == "neurons";
    if ((s == "layers" || s == "hidden") && other.empty()) other = s;
  }
  need(heads_or_neurons, "prune.structures is [" + other +
                             "] alone; the budget is spent over heads and neurons: use heads,neurons," + other +
                             (other == "layers" ? " (or --target-layers N to drop whole layers alone)" : ""));
  // Every key is checked whatever the mode, before stage 1 claims the folder: one checked only where it is used
  // failed after the work had started, and the corrected command then found a folder of another config.
  hidden_widths(arch.hidden_size, p.hidden_widths);  // ConfigError naming a width out of range
  layer_counts(arch.num_hidden_layers, p.layer_counts);
  need(p.search_examples >= 0,
       "prune.search_examples = " + std::to_string(p.search_examples) + "; use 0 (all) or a count");
  need(p.tuning_damping >= 0, "prune.tuning_damping must be 0 or positive");
  for (size_t i = 0; i < p.budget_schedule.size(); ++i)
    need(p.budget_schedule[i] > 0 && p.budget_schedule[i] <= 100 &&
             (i == 0 || p.budget_schedule[i] < p.budget_schedule[i - 1]),
         "prune.budget_schedule must decrease within 1..100 (percent kept); e.g. [100, 90, 80, 70, 60, 50, 40, 30]");
  need(!(budget_mode(p) && arch.slimmed()),
       "the model is already slimmed (its config.json has pruned_heads or intermediate_sizes); a budget search "
       "starts from the unpruned fine-tuned model");
}

// --max-drop D: points of the metric in [0, 100), and the frontier alone chooses the method and the budget.
void validate_frontier(const core::PruneConfig& p) {
  for (const auto& name : p.frontier_precisions) core::precision_setting(name, "prune.frontier_precisions");
  for (const auto& name : p.frontier_criteria)
    p.max_drop > 0 ? check_criterion(name, p, "prune.frontier_criteria")
                   : find_criterion(name, "prune.frontier_criteria");
  frontier_gate_budgets(p.frontier_gates, Frontier{});  // ConfigError naming a bad entry
  if (p.frontier_refine < 0 || p.frontier_refine > 5)
    throw ConfigError("prune.frontier_refine = " + std::to_string(p.frontier_refine) +
                      "; use 0 (the schedule alone) to 5 rounds, e.g. 1");
  if (!(p.frontier_time > 0 && p.frontier_time <= 60))
    throw ConfigError("prune.frontier_time = " + core::format_number("%g", p.frontier_time) +
                      "; use seconds in (0, 60], e.g. 0.3");
  if (p.max_drop == 0) return;
  if (!(p.max_drop > 0 && p.max_drop < 100))
    throw ConfigError("prune.max_drop = " + core::format_number("%g", p.max_drop) +
                      "; use the points of the metric the exported model may lose against the unpruned fp32 model, "
                      "e.g. 1 (0 = off)");
  const char* target = p.target_heads > 0      ? "target_heads"
                       : p.target_flops > 0    ? "target_flops"
                       : p.target_params > 0   ? "target_params"
                       : p.target_latency > 0  ? "target_latency"
                                               : nullptr;
  if (target)
    throw ConfigError("prune.max_drop and prune." + std::string(target) +
                      " are both set: --max-drop D measures every budget and picks the fastest within D; give "
                      "--max-drop D alone, or drop it for a budget of your own");
  if (core::dist::active())
    throw ConfigError("prune.max_drop times every candidate on one machine: run --max-drop without torchrun or "
                      "srun (one process), or give a budget of your own (--target-flops F) to a data-parallel run");
  // The precisions the candidates are measured at (frontier_stage.cpp native_precisions; fp32 only where asked):
  // none would leave the unpruned baseline alone, and the run would end with "no candidate within D".
  bool any = false;
  for (const auto& name : p.frontier_precisions) {
    const core::Precision q = core::precision_setting(name, "prune.frontier_precisions");
    any = any || q == core::Precision::kFp32 || core::lowp_native(q);
  }
  if (!any)
    throw ConfigError(
        p.frontier_precisions.empty()
            ? std::string("prune.frontier_precisions is empty, so --max-drop would measure no candidate; use fp32, "
                          "bf16 or int8, e.g. [fp32, int8]")
            : "prune.frontier_precisions = [" + core::join_list(p.frontier_precisions) + "] has no precision this CPU " +
                  "runs natively (instruction-set cap " + core::isa::name(core::isa::cap()) +
                  (core::isa::cap_from_environment() ? " from HEADPRUNE_MAX_ISA" : "") +
                  "), so --max-drop would measure no candidate; add fp32, e.g. [fp32, " +
                  core::join_list(p.frontier_precisions) + "]");
  if (p.method != core::MethodKind::kBest)
    throw ConfigError("prune.method = " + core::choice_text(p.method) +
                      " with prune.max_drop: the frontier measures the head criteria and the budget search itself; "
                      "leave prune.method = best");
}

// --target-layers N: alone, 1..L-1 layers, a known choice.
void validate_layers(const core::PruneConfig& p, const core::BertConfig& arch) {
  const int L = arch.num_hidden_layers;
  keep_layers(p.layer_choice, {0.0, 0.0}, 1);  // ConfigError for an unknown choice, whatever the mode
  if (p.target_layers == 0) return;
  if (L == 1)
    throw ConfigError("prune.target_layers = " + std::to_string(p.target_layers) +
                      " but the model has 1 layer, and a model keeps at least one: there is no layer to drop; prune "
                      "heads or neurons instead (--target-heads N or --target-flops F)");
  if (p.target_layers < 0 || p.target_layers >= L)
    throw ConfigError("prune.target_layers = " + std::to_string(p.target_layers) + " but the model has " +
                      std::to_string(L) + " layers; use 1.." + std::to_string(L - 1) + " (or 0 for off)");
  // --max-drop runs as a FLOPs budget (budget_mode), so it is named before the budgets: "prune.max_drop", never
  // "prune.a FLOPs … budget".
  const char* other = p.target_heads > 0 ? "prune.target_heads"
                      : p.max_drop > 0   ? "prune.max_drop"
                      : budget_mode(p)   ? "a FLOPs, parameter or latency budget"
                                         : nullptr;
  if (other)
    throw ConfigError("prune.target_layers and " + std::string(other) +
                      " are both set; give --target-layers N alone (it drops whole layers, then recovers)");
  if (p.method != core::MethodKind::kBest)
    throw ConfigError("prune.method = " + core::choice_text(p.method) + " with --target-layers: whole layers are chosen by "
                      "prune.layer_choice (fisher, top or alternate), not by a method; leave prune.method = best");
}

// What a tagger's run (a token head) does not do yet: one line naming the key each.
void validate_tagger(const core::Config& cfg) {
  const core::PruneConfig& p = cfg.prune;
  auto refuse = [](bool bad, const std::string& what) {
    if (bad) throw ConfigError(what + " is not available for token classification (data.task_type); " +
                               "remove it from the config");
  };
  auto has = [](const std::vector<std::string>& v, const char* x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  refuse(has(p.criteria, "attattr"), "prune.criteria attattr (attention attribution explains one class of a sequence)");
  refuse(has(p.frontier_criteria, "attattr"), "prune.frontier_criteria attattr");
  refuse(has(p.structures, "hidden"), "prune.structures hidden (the tagger's classifier reads every hidden channel)");
  refuse(!p.distill_tasks.empty(), "prune.distill_tasks");
  refuse(cfg.gates.distill_augment > 0, "gates.distill_augment (word swaps)");
}

}  // namespace

void validate_prune_config(const core::PruneConfig& p, const core::BertConfig& arch) {
  const int total = arch.total_heads();
  for (const auto& c : p.criteria) check_criterion(c, p);
  schedule_counts(p.schedule, p.schedule_unit, total);
  need(p.target_heads >= 0 && p.target_heads <= total,
       "prune.target_heads = " + std::to_string(p.target_heads) + " but the model has " + std::to_string(total) +
           " heads; use 1.." + std::to_string(total) + " (or 0 for curves only)");
  need(p.rank_examples >= 0,
       "prune.rank_examples = " + std::to_string(p.rank_examples) + "; use 0 (all) or a positive count");
  need(p.rank_batch_size >= 1, "prune.rank_batch_size must be positive");
  need(p.seeds >= 1, "prune.seeds = " + std::to_string(p.seeds) + "; use 1 or more");
  need(p.bootstrap >= 0, "prune.bootstrap = " + std::to_string(p.bootstrap) + "; use 0 (off) or a positive count");
  need(p.attattr_steps >= 1,
       "prune.attattr_steps = " + std::to_string(p.attattr_steps) + "; use 1 or more (paper: 20)");
  riemann_alphas(1, p.attattr_riemann);
  need(p.attattr_target == "gold" || p.attattr_target == "predicted",
       "prune.attattr_target = '" + p.attattr_target + "'; use gold or predicted");
  need(p.min_heads_per_layer >= 0 && p.min_heads_per_layer <= arch.num_attention_heads,
       "prune.min_heads_per_layer = " + std::to_string(p.min_heads_per_layer) + "; use 0.." +
           std::to_string(arch.num_attention_heads));
  need(p.recover_steps >= 0, "prune.recover_steps must be 0 (off) or positive");
  need(p.distill_hidden >= 0 && std::isfinite(p.distill_hidden),
       "prune.distill_hidden = " + core::format_number("%g", p.distill_hidden) +
           "; it weighs the layer-wise term of the recovery: 0 (off) or a positive number, e.g. 1");
  need(p.recover_scale == "removed" || p.recover_scale == "fixed",
       "prune.recover_scale = '" + p.recover_scale + "'; use removed (budget points recover longer the more they "
       "removed) or fixed (prune.recover_steps at every budget)");
  need(p.curve_recover_steps >= -1, "prune.curve_recover_steps = " + std::to_string(p.curve_recover_steps) +
                                        "; use -1 (= recover_steps), 0 (no recovered line) or a step count");
  validate_frontier(p);
  validate_budget(p, arch);
  validate_layers(p, arch);
  if (p.method == core::MethodKind::kCriterion) find_criterion(p.method.criterion, "prune.method");
  if (p.target_heads > 0) {
    const int reachable = total - max_prunable(all_heads(arch), p.min_heads_per_layer);
    need(p.target_heads >= reachable, "prune.target_heads = " + std::to_string(p.target_heads) + " is below the " +
                                          std::to_string(reachable) +
                                          " heads prune.min_heads_per_layer keeps; raise it or lower that minimum");
  }
  // A key the mode never reads: one warning each, at the start (prune/run/key_use.h).
  for (const auto& line : unused_settings(p)) core::log_warn("prune", line);
}
void validate_run(const core::Config& cfg) {
  if (cfg.prune.objective == core::Objective::kEmbedding) {
    validate_embedding_run(cfg);  // a sentence-transformers folder first: its Transformer module holds the encoder
    validate_prune_config(cfg.prune,
                          core::read_bert_config(core::read_sentence_model(cfg.model.path).transformer_dir + "/config.json"));
    return;
  }
  const core::BertConfig arch = core::read_bert_config(cfg.model.path + "/config.json");
  validate_prune_config(cfg.prune, arch);
  if (cfg.data.from_files() && core::task_of(cfg.data, cfg.model.path).head == core::Head::kToken) validate_tagger(cfg);
  if (!cfg.prune.frontier_models.empty())
    check_frontier_models(cfg.prune, arch, cfg.model.path,
                          core::task_load_options(core::task_of(cfg.data, cfg.model.path), cfg.run.seed));
}

}  // namespace hp::prune
