// The pruning run (see prune/run/pipeline.h).
#include "prune/run/pipeline.h"

#include <cmath>
#include <optional>
#include <string>

#include "core/base/errors.h"
#include "prune/embedding/embedding_run.h"
#include "prune/finish/finish.h"
#include "prune/frontier/frontier_stage.h"
#include "prune/run/validate.h"
#include "prune/stages/budget.h"
#include "prune/stages/control.h"
#include "prune/stages/stages.h"

namespace hp::prune {

namespace {

// Stage 5 with --max-drop: the search refined where the measured candidates cross D (prune.frontier_refine rounds,
// each at the midpoint between the deepest budget within D of the reference on the slice and the next deeper one: the
// budget curves' point 100 + its percent), the gates trained at prune.frontier_gates' budgets, the control as long as
// the longest-trained candidate, and the refinement again where the control became the reference (a refined budget
// lies between two measured ones, so its recovery is no longer than theirs: the control stays as long as the
// longest); then the frontier measures what they stored and chooses. Empty when stopped.
std::optional<Frontier> frontier(RunContext& ctx, CurvesSummary& curves, const MaskGradients& grads) {
  const core::PruneConfig& P = ctx.cfg->prune;
  FrontierPlan plan;
  auto searched = measure_candidates(ctx, curves, plan);
  auto refine = [&] {  // false when stopped
    for (int round = 0; searched && round < P.frontier_refine; ++round) {
      const auto pct = refine_budget(*searched, kRefineGapPercent);
      if (!pct) break;
      log_stage(5, "frontier",
                "the budget search refined at " + std::to_string(*pct) + "% of the FLOPs (round " +
                    std::to_string(round + 1) + " of " + std::to_string(P.frontier_refine) +
                    "): between the deepest budget within D of " + reference_words(*searched) +
                    " metric on the selection slice and the next deeper one");
      if (!budget_point_at(ctx, grads, 100 + *pct, *pct / 100.0)) return false;
      plan.refined.push_back(*pct);
      searched = measure_candidates(ctx, curves, plan);
    }
    return searched.has_value();
  };
  if (!refine()) return std::nullopt;
  for (const double fraction : frontier_gate_budgets(P.frontier_gates, *searched)) {
    const core::Config c = gates_budget_config(*ctx.cfg, fraction, 0);
    if (!train_budget_gates(ctx, c, frontier_gates_dir(std::lround(100 * fraction)), 5, "frontier"))
      return std::nullopt;
    plan.gates.push_back(fraction);
  }
  const long steps = P.control && ctx.objective->has_control() ? longest_candidate_training(ctx) : 0;
  if (steps > 0) {
    if (!train_control(ctx, steps, true, 5, "frontier", "the longest-trained candidate")) return std::nullopt;
    plan.control = true;
    if (P.frontier_refine > 0) {  // refined again only against a new reference: its rounds are spent otherwise
      if (!(searched = measure_candidates(ctx, curves, plan))) return std::nullopt;
      if (searched->reference == "control" && !refine()) return std::nullopt;
    }
  }
  return measure_frontier(ctx, curves, plan);
}

// Stages 5-9 after the curves: the frontier's choice with --max-drop, the final model (`final`: the mode makes one),
// the summary.
int finish_run(RunContext& ctx, RunSummary& s, const MaskGradients* grads, bool final) {
  std::optional<core::Config> chosen;  // prune.max_drop: the frontier's choice (prune/frontier/frontier_stage.h)
  if (ctx.cfg->prune.max_drop > 0) {  // 5
    const auto f = frontier(ctx, s.curves, *grads);
    if (!f) return kInterruptedExit;
    adopt_frontier_choice(ctx, s, *f, chosen);
  }
  FinalModels models;
  if (final || s.frontier) {
    s.final = final_model(ctx, s.curves, models, grads, s.frontier ? &*s.frontier : nullptr);  // 5-8
    if (!s.final) return kInterruptedExit;
  }
  write_summary(ctx, s, &models);  // 9
  return 0;
}

// A classifier's, tagger's or regressor's stages 2-9: the head criteria and their curves always; the search's mask
// gradients and its budget curves with a budget or --max-drop, the gradients alone with --target-layers.
int run_task_stages(RunContext& ctx) {
  const core::PruneConfig& P = ctx.cfg->prune;
  if (!fine_tune(ctx)) return kInterruptedExit;  // 2
  const auto importance = score(ctx);  // 3
  if (!importance) return kInterruptedExit;
  std::optional<MaskGradients> grads;
  const bool layers = P.target_layers > 0, budget = budget_mode(P);
  if ((budget || layers) && !(grads = budget_gradients(ctx))) return kInterruptedExit;
  auto curve_summary = curves(ctx, *importance);  // 4
  if (!curve_summary || (grads && !layers && !budget_curves(ctx, *grads, *curve_summary))) return kInterruptedExit;
  RunSummary s = run_summary(ctx);
  s.curves = std::move(*curve_summary);
  return finish_run(ctx, s, grads ? &*grads : nullptr, P.target_heads > 0 || budget || layers);
}

// A sentence-embedding model's stages 3-9 (it is its own teacher: nothing to fine-tune): --target-heads the
// criteria and their curves, a budget the search's mask gradients (the gates need none), --max-drop also the budget
// curves, the frontier's candidates.
int run_embedding_stages(RunContext& ctx) {
  const core::PruneConfig& P = ctx.cfg->prune;
  RunSummary s = run_summary(ctx);
  s.finetuned_model = ctx.cfg->model.path;
  std::optional<MaskGradients> grads;
  if (P.target_heads > 0) {
    const auto importance = score(ctx);  // 3
    auto curves = importance ? prune::curves(ctx, *importance) : std::nullopt;  // 4
    if (!curves) return kInterruptedExit;
    s.curves = std::move(*curves);
  } else if (P.method != core::MethodKind::kGates && !(grads = budget_gradients(ctx))) {
    return kInterruptedExit;
  }
  if (P.max_drop > 0 && !budget_curves(ctx, *grads, s.curves)) return kInterruptedExit;  // 4
  return finish_run(ctx, s, grads ? &*grads : nullptr, true);
}

}  // namespace

int run_pruning(const core::Config& cfg, const std::atomic<bool>* stop) {
  validate_run(cfg);  // before any work, for either objective
  const bool embedding = cfg.prune.objective == core::Objective::kEmbedding;
  EmbedRun embed;  // what an embedding run reads (its teacher, sentences and pairs), which its context points into
  RunContext ctx;
  if (embedding) prepare_embedding(embed, ctx, cfg, stop);  // 1
  else prepare(ctx, cfg, stop);
  try {
    return embedding ? run_embedding_stages(ctx) : run_task_stages(ctx);
  } catch (const ConfigError&) {  // a new run's folder is left as the corrected command can take it
    ctx.store->abandon_new_run();
    throw;
  }
}

}  // namespace hp::prune
