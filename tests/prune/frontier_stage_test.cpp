// The frontier's choice as the config stages 7-9 run under (prune/frontier/frontier_stage.h: chosen_config): the chosen
// precision, and no budget, method or recovery of its own whatever the candidate (#58: the export is the model
// the frontier measured, never rebuilt by a --target-heads or --target-flops run).
// Also the best criterion the frontier and --target-heads rank heads by (prune/stages/stages.h: best_criterion).
#include <catch2/catch.hpp>

#include <limits>

#include "prune/stages/best_step.h"
#include "prune/frontier/frontier_stage.h"
#include "prune/stages/stages.h"

using hp::prune::PointMethod;
using hp::prune::chosen_config;
using hp::prune::Frontier;
using hp::prune::FrontierPoint;

namespace {

// A frontier whose choice is `p` (the unpruned fp32 reference beside it).
Frontier choosing(FrontierPoint p) {
  Frontier f;
  FrontierPoint base;
  base.method = PointMethod::kUnpruned, base.precision = "fp32", base.heads_kept = 72, base.reference = true;
  f.points = {base, p};
  f.chosen = 1;
  return f;
}

FrontierPoint point(const char* method, const char* precision) {
  FrontierPoint p;
  p.method = hp::prune::parse_point_method(method), p.precision = precision;
  return p;
}

}  // namespace

TEST_CASE("chosen_config: every kind of candidate keeps its precision and asks for nothing to be built again",
          "[prune][frontier]") {
  hp::core::Config cfg;
  cfg.prune.max_drop = 1;
  cfg.prune.recover_steps = 300;
  cfg.prune.curve_recover_steps = 50;
  for (const auto& [method, precision] : std::vector<std::pair<const char*, const char*>>{
           {"heads", "int8"}, {"unpruned", "int8"}, {"kwon", "fp32"}, {"kwon", "bf16"}, {"gates", "int8"}, {"model", "fp32"}}) {
    INFO(method << " " << precision);
    auto p = point(method, precision);
    p.criterion = "taylor", p.heads_kept = 36, p.flops_kept = 0.4, p.step = 30;
    const auto c = chosen_config(cfg, choosing(p));
    CHECK(c.run.precision == precision);
    CHECK(c.prune.max_drop == 0);
    CHECK(c.prune.target_heads == 0);
    CHECK(c.prune.target_flops == 0);
    CHECK(c.prune.method == hp::core::MethodKind::kBest);
  }
  CHECK(hp::prune::frontier_gates_dir(30) == "frontier_gates/30");
}

TEST_CASE("budget recoveries: longer the more a point removed (prune.recover_scale = removed), or fixed", "[prune]") {
  using hp::prune::budget_recover_steps;
  hp::core::PruneConfig p;  // recover_steps 300, curve_recover_steps -1 (= 300), recover_scale removed
  CHECK(budget_recover_steps(p, 0.5, false) == 300);
  CHECK(budget_recover_steps(p, 0.3, false) == 420);
  CHECK(budget_recover_steps(p, 0.2, true) == 480);
  CHECK(budget_recover_steps(p, 0.9, false) == 60);  // at least a fifth
  CHECK(budget_recover_steps(p, 1.0, true) == 60);
  p.curve_recover_steps = 100;  // the curves' own count, scaled alike; stage 6 keeps recover_steps
  CHECK(budget_recover_steps(p, 0.3, true) == 140);
  CHECK(budget_recover_steps(p, 0.3, false) == 420);
  p.curve_recover_steps = 0;  // no recovered line
  CHECK(budget_recover_steps(p, 0.3, true) == 0);
  p.recover_scale = "fixed";
  CHECK(budget_recover_steps(p, 0.3, false) == 300);
  p.recover_steps = 0;
  CHECK(budget_recover_steps(p, 0.3, false) == 0);
}

TEST_CASE(
    "recovery_config: no gates, its own length, a teacher under a fixed head mask, with prune.distill_hidden or word "
    "swaps",
    "[prune]") {
  hp::core::Config cfg;
  cfg.gates.target_flops = 0.4, cfg.gates.distill_hidden = 1.0, cfg.gates.distill_temperature = 3.0;
  cfg.prune.recover_distill = true;
  cfg.train.max_train_examples = 12800, cfg.train.max_steps = 2000;
  const hp::core::Config masked = hp::prune::recovery_config(cfg, 300, false);
  CHECK(masked.gates.target_flops == 0);  // no gates: the structure is fixed
  CHECK(masked.gates.distill_hidden == 0);
  CHECK(masked.gates.distill);  // prune.recover_distill, under the fixed mask
  CHECK(masked.gates.distill_temperature == 3.0);
  CHECK(masked.train.max_steps == 300);
  CHECK(masked.train.eval_every == 150);
  CHECK(masked.train.max_train_examples == 0);  // fine-tuning's trim leaves the recovery alone (#58)
  // A slimmed model trains on the labels: no teacher is loaded for it (docs/budgets.md stage 6)...
  CHECK_FALSE(hp::prune::recovery_config(cfg, 300, true).gates.distill);
  // ... unless prune.distill_hidden asks for the layers: then it distils the logits and the layers, as a masked one.
  cfg.prune.distill_hidden = 0.5;
  for (const bool slimmed : {true, false}) {
    const hp::core::Config c = hp::prune::recovery_config(cfg, 300, slimmed);
    CHECK(c.gates.distill);
    CHECK(c.gates.distill_hidden == 0.5);
    CHECK(c.gates.target_flops == 0);
  }
  // ... or the word swaps (gates.distill_augment), which need a teacher to label the swapped rows.
  cfg.prune.distill_hidden = 0;
  cfg.gates.distill_augment = 0.4;
  const hp::core::Config swapped = hp::prune::recovery_config(cfg, 300, true);
  CHECK(swapped.gates.distill);
  CHECK(swapped.gates.distill_augment == 0.4);
  CHECK(swapped.gates.distill_hidden == 0);
  // ... or other tasks' rows (prune.distill_tasks), which only the teacher labels.
  cfg.gates.distill_augment = 0;
  cfg.prune.distill_tasks = {"stsb"};
  CHECK(hp::prune::recovery_config(cfg, 300, true).gates.distill);
  cfg.prune.recover_distill = false;
  CHECK_FALSE(hp::prune::recovery_config(cfg, 300, false).gates.distill);
  CHECK_FALSE(hp::prune::recovery_config(cfg, 300, true).gates.distill);
}

TEST_CASE("the best criterion: an undefined area (Spearman of constant predictions) ranks last, but still counts",
          "[prune]") {
  using hp::prune::best_criterion;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  hp::prune::CurvesSummary c;
  std::string why;
  c.areas = {{"taylor", nan}};  // the only criterion, its curve undefined at a point: it is the choice
  CHECK(best_criterion(c, &why) == "taylor");
  c.areas = {{"taylor", nan}, {"lrp", 0.2}, {"random", 0.9}};  // random only when alone
  CHECK(best_criterion(c, &why) == "lrp");
  c.areas = {{"random", 0.4}};
  CHECK(best_criterion(c, &why) == "random");
}
