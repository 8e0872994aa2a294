// The frontier's choice as the config that builds it (prune/frontier_stage.h: chosen_config): every kind of
// candidate, its budget, method, recovery and precision; --max-drop itself off in the chosen config.
#include <catch2/catch.hpp>

#include "prune/frontier_stage.h"

using hp::prune::chosen_config;
using hp::prune::Frontier;
using hp::prune::FrontierPoint;

namespace {

// A frontier whose choice is `p` (the unpruned fp32 reference beside it).
Frontier choosing(FrontierPoint p) {
  Frontier f;
  FrontierPoint base;
  base.method = "unpruned", base.precision = "fp32", base.heads_kept = 72, base.reference = true;
  f.points = {base, p};
  f.chosen = 1;
  return f;
}

FrontierPoint point(const char* method, const char* precision) {
  FrontierPoint p;
  p.method = method, p.precision = precision;
  return p;
}

}  // namespace

TEST_CASE("chosen_config: each kind of candidate becomes the run that builds it, at its precision",
          "[prune][frontier]") {
  hp::core::Config cfg;
  cfg.prune.max_drop = 1;
  cfg.prune.recover_steps = 300;
  cfg.prune.curve_recover_steps = 50;

  SECTION("a head criterion's ranking: exactly its heads by that criterion, no recovery") {
    auto p = point("heads", "int8");
    p.criterion = "taylor", p.heads_kept = 36;
    const auto c = chosen_config(cfg, choosing(p));
    CHECK(c.prune.target_heads == 36);
    CHECK(c.prune.method == "taylor");
    CHECK(c.prune.recover_steps == 0);
    CHECK(c.run.precision == "int8");
    CHECK(c.prune.max_drop == 0);
  }
  SECTION("the unpruned model quantised: all heads, best, no recovery") {
    auto p = point("unpruned", "int8");
    p.heads_kept = 72;
    const auto c = chosen_config(cfg, choosing(p));
    CHECK(c.prune.target_heads == 72);
    CHECK(c.prune.method == "best");
    CHECK(c.prune.target_flops == 0);
  }
  SECTION("the search recovered: its FLOPs budget, recovered as the budget curves were") {
    auto p = point("kwon-recovered", "fp32");
    p.flops_kept = 0.4;
    const auto c = chosen_config(cfg, choosing(p));
    CHECK(c.prune.target_flops == 0.4);
    CHECK(c.prune.method == "kwon");
    CHECK(c.prune.recover_steps == 50);
    CHECK(c.prune.target_heads == 0);
    CHECK(c.run.precision == "fp32");
  }
  SECTION("the search tuned only: no recovery") {
    auto p = point("kwon-tuned", "bf16");
    p.flops_kept = 0.6;
    const auto c = chosen_config(cfg, choosing(p));
    CHECK(c.prune.target_flops == 0.6);
    CHECK(c.prune.recover_steps == 0);
    CHECK(c.run.precision == "bf16");
  }
  SECTION("the gates: --method gates at the budget they were trained to (not the budget they reached)") {
    auto p = point("gates", "int8");
    p.step = 30, p.flops_kept = 0.2987;
    const auto c = chosen_config(cfg, choosing(p));
    CHECK(c.prune.method == "gates");
    CHECK(c.prune.target_flops == Approx(0.30));
    CHECK(c.prune.target_heads == 0);
    CHECK(c.prune.max_drop == 0);
    CHECK(hp::prune::frontier_gates_dir(p.step) == "frontier_gates/30");
  }
}
