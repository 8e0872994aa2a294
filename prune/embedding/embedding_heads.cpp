// `--target-heads N` and the criteria's curves for a sentence-embedding model (see prune/embedding/embedding_heads.h).
#include "prune/embedding/embedding_heads.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/base/strings.h"
#include "core/dist/distributed.h"
#include "eval/flops.h"
#include "prune/heads/curves.h"  // to_matrix, Aggregate
#include "prune/heads/report.h"  // write_curve_report
#include "prune/data/distill_data.h"
#include "prune/embedding/embedding_finish.h"
#include "core/plot/plot.h"
#include "prune/heads/schedule.h"
#include "prune/export/slim.h"
#include "prune/stages/stages.h"

namespace hp::prune {

namespace fs = std::filesystem;
using json = nlohmann::json;

void validate_embedding_heads(const core::Config& cfg) {
  const core::PruneConfig& p = cfg.prune;
  for (const auto& c : p.criteria)
    if (find_criterion(c).reads_gated_run)
      throw ConfigError("prune.objective = embedding: prune.criteria has " + c +
                        ", which reads a classifier's gated run; "
                        "leave it out (--method gates --target-flops F trains the gates for embeddings)");
  if (p.seeds != 1 || p.iterative || p.rank_split != "train")
    throw ConfigError(
        "prune.objective = embedding: --target-heads ranks the heads once, with one seed, on the training "
        "sentences the run distils: leave prune.seeds 1, prune.iterative false and prune.rank_split train");
  const bool taylor = std::count(p.criteria.begin(), p.criteria.end(), "taylor") || (p.method == core::MethodKind::kCriterion && p.method.criterion == "taylor");
  if (taylor && p.taylor_token_level)
    throw ConfigError(
        "prune.objective = embedding: prune.taylor_token_level is a classifier's loss per token; an "
        "embedding's Taylor reads the whole embedding's derivative: set it false");
  if (p.method == core::MethodKind::kBest || p.method == core::MethodKind::kKwon) return;
  if (p.method == core::MethodKind::kCriterion) find_criterion(p.method.criterion, "prune.method");
  if (p.method == core::MethodKind::kGates)
    throw ConfigError(
        "prune.objective = embedding: --method gates trains to a FLOPs budget, not to a head count; "
        "pass --target-flops F with it, or a criterion (--method taylor) with --target-heads N");
}

int run_embedding_heads(const EmbedRun& r, RunSummary& s, const json& unpruned) {
  RunContext ctx;
  stage_context(r, ctx);
  s.rank_examples = static_cast<long>(ctx.rank_sets[0].size());
  const auto importance = score(ctx);  // 3
  auto curves = importance ? prune::curves(ctx, *importance) : std::nullopt;  // 4
  if (!curves) return kInterruptedExit;
  s.curves = std::move(*curves);
  s.files = s.curves.files;
  auto choice = choose_heads(ctx, s.curves);  // 5
  if (!choice) return kInterruptedExit;
  std::vector<std::pair<std::string, core::Bert>> models;
  models.emplace_back("masked", slim_model(r.teacher->model, choice->keep));
  if (!recover(ctx, *choice)) return kInterruptedExit;  // 6
  if (choice->model_dir != ctx.model_dir)
    models.emplace_back("recovered", slim_model(core::load_bert(choice->model_dir, {}), choice->keep));
  const std::string state = r.state + "/heads";
  json steps = json::object();
  const std::string chosen = score_variants(r, models, state, steps);
  FinalSummary f;
  f.method = choice_method_name(ChoiceMethod::kCriterion);
  f.criterion = choice->criterion;
  f.selected_step = chosen;
  f.metrics = summary_metrics(steps[chosen]);
  if (steps.contains("recovered")) f.metrics_before_recovery = summary_metrics(steps["masked"]);
  f.reference = teacher_reference(unpruned, steps[chosen]);
  const auto& model = std::find_if(models.begin(), models.end(), [&](const auto& x) { return x.first == chosen; });
  core::StructureMask keep{choice->keep, {}};  // every FFN neuron kept
  for (int l = 0; l < ctx.arch.num_hidden_layers; ++l) keep.neurons.emplace_back(ctx.arch.ffn_width(l), true);
  const core::UnitCosts unit = eval::unit_costs(ctx.arch, false, r.objective->mean_length());
  finish_one(r, model->second, keep, core::structure_cost(keep, unit) / eval::total_cost(ctx.arch, unit), f, s,
             std::to_string(r.cfg->prune.target_heads) + " heads by " + choice->criterion + ", " + chosen);
  return 0;
}

}  // namespace hp::prune
