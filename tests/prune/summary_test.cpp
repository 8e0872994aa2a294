// summary.json from RunSummary (prune/stages/summary.h): the keys users, the model card and `prune report` read,
// present exactly when they apply.
#include <catch2/catch.hpp>

#include "prune/stages/control.h"
#include "prune/stages/summary.h"

using hp::prune::RunSummary;

namespace {

RunSummary two_criteria() {
  RunSummary s;
  s.task = "sst2", s.model = "m", s.finetuned_model = "m/ft", s.metric = "accuracy";
  s.eval_split = "dev", s.rank_split = "train", s.heads_total = 8, s.rank_examples = 12;
  hp::prune::Aggregate a;
  a.criterion = "taylor", a.pruned = 0, a.mean = 0.9, a.lo = 0.85, a.hi = 0.95;
  s.curves.aggregates.push_back(a);
  a.pruned = 4, a.mean = 0.8;
  s.curves.aggregates.push_back(a);
  a.criterion = "lrp", a.pruned = 4, a.mean = 0.7;  // no unpruned point: no fraction
  s.curves.aggregates.push_back(a);
  s.curves.fractions = {{"taylor", 0.0}};
  s.curves.areas = {{"taylor", 0.85}, {"lrp", 0.7}};
  s.files = {"curves.csv"};
  return s;
}

}  // namespace

TEST_CASE("summary.json: criteria and curves, no final section without --target-heads", "[prune][summary]") {
  const auto j = hp::prune::summary_json(two_criteria());
  CHECK(j.at("heads_total") == 8);
  CHECK(j.at("rank_examples") == 12);
  CHECK(j.at("precision") == "fp32");  // run.precision of the curve points and the speed measurement
  CHECK(j.at("files") == nlohmann::json::array({"curves.csv"}));
  CHECK_FALSE(j.contains("final"));
  CHECK(j["criteria"]["taylor"]["largest_fraction_pruned_within_1_point"] == 0.0);
  CHECK_FALSE(j["criteria"]["lrp"].contains("largest_fraction_pruned_within_1_point"));
  CHECK(j["criteria"]["lrp"]["mean_metric_over_schedule"] == 0.7);
  REQUIRE(j["criteria"]["taylor"]["curve"].size() == 2);
  CHECK(j["criteria"]["taylor"]["curve"][1] ==
        nlohmann::json({{"heads_pruned", 4}, {"mean", 0.8}, {"ci_lo", 0.85}, {"ci_hi", 0.95}}));
}

TEST_CASE("summary.json: the final section, criterion only when one ranked the heads", "[prune][summary]") {
  RunSummary s = two_criteria();
  hp::prune::FinalSummary f;
  f.heads_kept = 3, f.mask = "0:1,2;1:0,1,3", f.method = "gates";
  f.metrics = {{"accuracy", 0.75}};
  f.hf_check = {{"transformers4", "skipped (verify off)"}};
  f.latency["batch32"] = {64, 10.0, 5.0, 2.0, 2.5, 0.8, "fp32", "int8"};
  f.params = 100, f.params_unpruned = 150;
  s.final = f;
  auto j = hp::prune::summary_json(s);
  const auto& fin = j.at("final");
  CHECK(fin.at("method") == "gates");
  CHECK_FALSE(fin.contains("criterion"));
  CHECK(fin.at("model_dir") == "model");
  CHECK(fin.at("metrics_before_recovery").is_object());
  CHECK(fin.at("metrics_before_recovery").empty());
  CHECK(fin.at("latency").at("batch32") == nlohmann::json({{"seq", 64},
                                                           {"unpruned_ms", 10.0},
                                                           {"slim_ms", 5.0},
                                                           {"speedup", 2.0},
                                                           {"flop_bound", 2.5},
                                                           {"fraction_of_bound", 0.8},
                                                           {"unpruned_precision", "fp32"},
                                                           {"slim_precision", "int8"}}));
  CHECK(fin.at("hf_check").at("transformers4") == "skipped (verify off)");
  CHECK(fin.at("params") == 100);
  s.final->method = "criterion", s.final->criterion = "taylor";
  j = hp::prune::summary_json(s);
  CHECK(j["final"]["criterion"] == "taylor");
}

// The final model's reference (prune/stages/control.h): the control only where it beat the unpruned model on the
// slice, the differences from whichever is the reference; summary.json's final.reference holds them all.
TEST_CASE("summary.json: the final model's reference, the better of the unpruned model and the control",
          "[prune][summary]") {
  hp::prune::ReferenceSummary r;
  r.unpruned = 88.0, r.unpruned_select = 89.0;
  r.control = 88.6, r.control_select = 89.6, r.control_steps = 150;
  hp::prune::settle_reference(r, 87.9, 88.9);
  CHECK(r.reference == "control");
  CHECK(r.delta == Approx(87.9 - 88.6));
  CHECK(r.select_delta == Approx(88.9 - 89.6));
  r.control_select = 89.0;  // a tie: the unpruned model
  hp::prune::settle_reference(r, 87.9, 88.9);
  CHECK(r.reference == "unpruned");
  CHECK(r.delta == Approx(87.9 - 88.0));
  r.control_select = 95.0, r.control_steps = 0;  // no control trained: its figures are not read
  hp::prune::settle_reference(r, 87.9, 88.9);
  CHECK(r.reference == "unpruned");
  hp::prune::FinalSummary f;
  f.reference = r;
  hp::prune::RunSummary s;
  s.final = f;
  const auto j = hp::prune::summary_json(s);
  CHECK(j["final"]["reference"]["reference"] == "unpruned");
  CHECK(j["final"]["reference"]["unpruned_select"] == 89.0);
  CHECK(j["final"]["reference"]["control_steps"] == 0);
}
