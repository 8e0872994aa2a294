// Which of a budget choice's models is kept, and how long it recovers (see prune/stages/best_step.h).
#include "prune/stages/best_step.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/base/strings.h"
#include "core/dist/distributed.h"
#include "core/io/checkpoint.h"
#include "eval/evaluator.h"
#include "prune/search/mask_tuning.h"
#include "prune/export/slim.h"
#include "train/task_run.h"

namespace hp::prune {

namespace fs = std::filesystem;

std::string step_name(Step s) {
  switch (s) {
    case Step::kSearched: return "searched";
    case Step::kRearranged: return "rearranged";
    case Step::kTuned: return "tuned";
    case Step::kRecovered: return "recovered";
  }
  return "";
}

Step parse_step(const std::string& name) {
  for (Step s : {Step::kSearched, Step::kRearranged, Step::kTuned, Step::kRecovered})
    if (step_name(s) == name) return s;
  throw InternalError("a budget step record names the unknown step '" + name + "'");
}

int budget_recover_steps(const core::PruneConfig& p, double fraction, bool curves) {
  const int base = curves ? (p.curve_recover_steps < 0 ? p.recover_steps : p.curve_recover_steps) : p.recover_steps;
  if (base <= 0 || p.recover_scale == "fixed") return base;
  const long scaled = std::lround(base * (1 - fraction) / 0.5);
  return static_cast<int>(std::max<long>(scaled, std::max(1, base / 5)));
}

BestStep best_step(const RunContext& ctx, const BudgetSearch& s, const std::string& recovered_dir) {
  HP_CHECK(ctx.objective->size(Split::kSelect) > 0, "best_step: no selection slice");
  const std::string metric = ctx.objective->choice_metric();
  BestStep best;
  double top = -1e300;
  auto consider = [&](Step variant, core::Bert model) {
    model.set_precision(core::Precision::kFp32);
    const double m = 100 * evaluate_on(ctx.curves, model, Split::kSelect).metrics.at(metric);
    if (!std::isfinite(m)) return;  // undefined (a correlation of constant predictions): never the best
    best.select_metrics[step_name(variant)] = m;
    if (m >= top) top = m, best.variant = variant, best.model.emplace(std::move(model));
  };
  consider(Step::kSearched, slim_model(*ctx.model, s.searched));
  consider(Step::kRearranged, slim_model(*ctx.model, s.rearranged));
  consider(Step::kTuned, slim_model(fold_scales(*ctx.model, s.scales), s.rearranged));
  if (!recovered_dir.empty()) consider(Step::kRecovered, core::load_bert(recovered_dir, ctx.load));
  if (!best.model) best.variant = Step::kTuned, best.model.emplace(slim_model(fold_scales(*ctx.model, s.scales), s.rearranged));
  return best;
}

std::string step_choice_file(const RunContext& ctx, int step) {
  return ctx.store->dir() + "/state/frontier/kwon-" + std::to_string(step) + ".step.json";
}

std::string budget_recover_dir(const RunContext& ctx, int step) {
  return ctx.cfg->run.out_dir + "/budget_recover/" + std::to_string(step);
}

std::string step_model_dir(const RunContext& ctx, int step) { return budget_recover_dir(ctx, step) + "/step"; }

namespace {

// The recovery's selection metric as the log says it, or "nothing defined" (undefined, or no recovery).
std::string recovered_score(const BestStep& b) {
  const auto it = b.select_metrics.find(step_name(Step::kRecovered));
  return it == b.select_metrics.end() ? "nothing defined" : core::format_number("%g", it->second);
}

// The chosen step's model in `dir` (none when it is the recovery's own, already saved) and then `marker`, last: a
// killed run decides again.
void save_step(const RunContext& ctx, const BestStep& b, const std::string& dir, const std::string& marker,
               const nlohmann::json& choice) {
  core::shared_write([&] {
    fs::remove_all(dir);
    if (b.variant != Step::kRecovered) core::save_bert(*b.model, dir, ctx.model_dir);
    fs::create_directories(fs::path(marker).parent_path());
    core::write_file_atomic(marker, choice.dump(2) + "\n");
  });
}

}  // namespace

nlohmann::json budget_step_choice(const RunContext& ctx, const BudgetSearch& s, int step, double fraction,
                                  const std::string& recovered_dir) {
  const std::string file = step_choice_file(ctx, step);
  if (fs::exists(file)) return nlohmann::json::parse(core::read_file(file));
  const BestStep b = best_step(ctx, s, recovered_dir.empty() ? "" : recovered_dir + "/best");
  double cost = 0;
  for (const auto& [name, t] : s.seconds) cost += t;
  if (b.variant == Step::kRecovered) cost += train::train_seconds(recovered_dir);
  const std::string name = step_name(b.variant);
  const nlohmann::json j = {{"variant", name}, {"select_metrics", b.select_metrics}, {"cost_s", cost}};
  save_step(ctx, b, step_model_dir(ctx, step), file, j);
  if (b.variant != Step::kRecovered && !recovered_dir.empty()) {
    std::ostringstream line;
    line << std::lround(100 * fraction) << "% FLOPs: the " << name << " model (" << b.select_metrics.at(name) << " on "
         << ctx.select_split << ") is the candidate; its recovery scored " << recovered_score(b) << " there";
    core::log_info("frontier", line.str());
  }
  return j;
}

void take_best_step(RunContext& ctx, const MaskGradients& grads, FinalChoice& choice) {
  if (ctx.objective->size(Split::kSelect) == 0) return;  // no selection slice: the recovered model
  const std::string dir = ctx.cfg->run.out_dir + "/best_step", marker = dir + "/step.json";
  if (!fs::exists(marker)) {
    const BudgetUnit unit = budget_unit(ctx);
    const bool recovered = budget_recover_steps(ctx.cfg->prune, unit.target, false) > 0;
    const BestStep b = best_step(ctx, search_at(ctx, grads, unit, unit.target), recovered ? choice.model_dir : "");
    save_step(ctx, b, dir, marker, {{"variant", step_name(b.variant)}, {"select_metrics", b.select_metrics}});
    std::ostringstream line;
    line << "the " << step_name(b.variant) << " model is the best of the search's steps on " << ctx.select_split << " ("
         << b.select_metrics.at(step_name(b.variant)) << ")";
    if (recovered && b.variant != Step::kRecovered) line << "; its recovery scored " << recovered_score(b);
    log_stage(6, "recover", line.str());
  }
  const auto j = nlohmann::json::parse(core::read_file(marker));
  if (parse_step(j.at("variant")) != Step::kRecovered) choice.model_dir = dir, choice.slimmed = true;
  if (choice.budget) {
    choice.budget->selected_step = j.at("variant").get<std::string>();
    choice.budget->selection_metrics = j.at("select_metrics").get<std::map<std::string, double>>();
  }
}

}  // namespace hp::prune
