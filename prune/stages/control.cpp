// The final model's reference (see prune/stages/control.h).
#include "prune/stages/control.h"

#include <algorithm>
#include <filesystem>
#include <tuple>
#include <utility>

#include "core/io/checkpoint.h"
#include "eval/evaluator.h"
#include "train/task_run.h"  // train_steps

namespace hp::prune {

namespace fs = std::filesystem;

namespace {

// The optimizer steps that made the model in `model_dir` (its run's train_result.json beside it), 0 when none did.
long trained_steps(const RunContext& ctx, const std::string& model_dir) {
  if (model_dir.empty() || fs::path(model_dir) == fs::path(ctx.model_dir)) return 0;
  return train::train_steps(fs::path(model_dir).parent_path().string());
}

// `model`'s primary metric, in points, on the evaluation split and on the selection slice (the evaluation split's
// again where the run has no slice).
std::pair<double, double> scores(const RunContext& ctx, const core::Bert& model) {
  const std::string& metric = ctx.objective->task().primary_metric;
  const double on_eval = 100 * ctx.objective->evaluate(model, Split::kEval).metrics.at(metric);
  if (ctx.objective->size(Split::kSelect) == 0) return {on_eval, on_eval};
  return {on_eval, 100 * ctx.objective->evaluate(model, Split::kSelect).metrics.at(metric)};
}

}  // namespace

std::optional<ReferenceSummary> final_reference(RunContext& ctx, const FinalChoice& choice, const core::Bert& final) {
  const core::Config& cfg = *ctx.cfg;
  ReferenceSummary r;
  std::tie(r.unpruned, r.unpruned_select) = scores(ctx, fp32_base(ctx));
  const long steps = cfg.prune.control && ctx.objective->has_control() ? trained_steps(ctx, choice.model_dir) : 0;
  if (steps > 0) {
    if (!train_control(ctx, steps, choice.slimmed, 6, "recover", "the final model")) return std::nullopt;
    r.control_steps = steps;
    std::tie(r.control, r.control_select) =
        scores(ctx, core::load_bert(cfg.run.out_dir + "/" + kControlDir + "/best", ctx.load));
  }
  const auto [metric, select] = scores(ctx, final);
  settle_reference(r, metric, select);
  return r;
}

bool train_control(const RunContext& ctx, long steps, bool slimmed, int stage, const std::string& name,
                   const std::string& as_long_as, const std::string& sub) {
  if (fs::exists(ctx.cfg->run.out_dir + "/" + sub + "/train_result.json")) return true;
  const core::Config c = recovery_config(*ctx.cfg, static_cast<int>(steps), slimmed);
  log_stage(stage, name,
            "the control: the unpruned model trained " + std::to_string(steps) + " steps, as long as " + as_long_as +
                (c.gates.distill ? ", distilling from itself" : "") + " (prune.control: false leaves it out)");
  return train_in(ctx, c, sub, ctx.model_dir, {}, 0, c.gates.distill ? ctx.model_dir : "");
}

long longest_candidate_training(const RunContext& ctx) {
  long steps = 0;
  for (const char* sub : {"budget_recover", "frontier_gates"}) {
    const fs::path root = fs::path(ctx.cfg->run.out_dir) / sub;
    if (!fs::is_directory(root)) continue;
    for (const auto& e : fs::directory_iterator(root)) steps = std::max(steps, train::train_steps(e.path().string()));
  }
  return steps;
}

void settle_reference(ReferenceSummary& r, double metric, double select) {
  const bool control = r.control_steps > 0 && r.control_select > r.unpruned_select;
  r.reference = control ? "control" : "unpruned";
  r.delta = metric - (control ? r.control : r.unpruned);
  r.select_delta = select - (control ? r.control_select : r.unpruned_select);
}

}  // namespace hp::prune
