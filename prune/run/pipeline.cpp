// The pruning run (see prune/run/pipeline.h).
#include "prune/run/pipeline.h"

#include <optional>

#include "core/base/errors.h"
#include "prune/embedding/embedding_run.h"
#include "prune/finish/finish.h"
#include "prune/frontier/frontier_stage.h"
#include "prune/run/validate.h"
#include "prune/stages/budget.h"
#include "prune/stages/stages.h"

namespace hp::prune {

namespace {

int run_stages(RunContext& ctx, const core::Config& cfg) {
  if (!fine_tune(ctx)) return kInterruptedExit;  // 2
  const auto importance = score(ctx);  // 3
  if (!importance) return kInterruptedExit;
  std::optional<MaskGradients> grads;  // with a FLOPs or parameter budget (prune/stages/budget.h) or --target-layers
  const bool layers = cfg.prune.target_layers > 0;
  if ((budget_mode(cfg.prune) || layers) && !(grads = budget_gradients(ctx))) return kInterruptedExit;
  auto curve_summary = curves(ctx, *importance);  // 4
  if (!curve_summary || (grads && !layers && !budget_curves(ctx, *grads, *curve_summary))) return kInterruptedExit;

  RunSummary s = run_summary(ctx);
  s.curves = std::move(*curve_summary);
  std::optional<core::Config> chosen;  // prune.max_drop: the frontier's choice (prune/frontier/frontier_stage.h)
  if (cfg.prune.max_drop > 0) {  // 5
    const auto f = measure_frontier(ctx, s.curves, *grads);
    if (!f) return kInterruptedExit;
    adopt_frontier_choice(ctx, s, *f, chosen);
  }
  const bool budget = budget_mode(ctx.cfg->prune);
  FinalModels models;
  const Frontier* frontier = s.frontier ? &*s.frontier : nullptr;
  if (ctx.cfg->prune.target_heads > 0 || budget || layers || frontier) {
    s.final = final_model(ctx, s.curves, models, budget || layers ? &*grads : nullptr, frontier);  // 5-8
    if (!s.final) return kInterruptedExit;
  }
  write_summary(ctx, s, &models);  // 9
  return 0;
}

}  // namespace

int run_pruning(const core::Config& cfg, const std::atomic<bool>* stop) {
  validate_run(cfg);  // before any work, for either objective
  if (cfg.prune.objective == core::Objective::kEmbedding) return run_embedding_pruning(cfg, stop);
  RunContext ctx;
  prepare(ctx, cfg, stop);  // 1
  try {
    return run_stages(ctx, cfg);  // 2-9
  } catch (const ConfigError&) {  // a new run's folder is left as the corrected command can take it
    ctx.store->abandon_new_run();
    throw;
  }
}

}  // namespace hp::prune
