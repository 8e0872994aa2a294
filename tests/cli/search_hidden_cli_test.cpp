// The pruning run's retraining-free search over hidden channels (`--target-flops F --structures
// heads,neurons,hidden`): the hidden mask's gradients scored beside the heads' and neurons', the channels removed
// from the export with the tuning scales folded in, transformers loading it through the modeling file, the
// budget spent at the narrower width, and a resumed run landing on the same model.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "cli/cli_util.h"
#include "core/io/tensor_io.h"

using hp::test::run_prune;
using hp::test::slurp;
using hp::test::tiny_prune_args;

TEST_CASE("the budget search over heads, neurons and hidden channels: the channels leave the export, on budget, "
          "resumable",
          "[cli][prune][budget][hidden]") {
  const auto out = hp::test::scratch_dir("hp_prune_search_hidden");
  std::filesystem::remove_all(out);
  const std::string args =
      tiny_prune_args(out.string()) +
      " --criteria taylor --target-flops 0.5 --structures heads,neurons,hidden --recover-steps 2"
      " --set train.train_split=matched --set train.eval_split=mismatched --set train.eval_every=1"
      " --set prune.budget_schedule=[100,50] --set prune.hidden_widths=[32,24]";
  auto r = run_prune(args);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("the heads, FFN neurons and hidden channels that fit 50.0%") &&
                           Catch::Contains("24/32 hidden channels"));
  const auto grads = hp::core::read_hdf5((out / "state" / "mask_gradients.h5").string());
  REQUIRE(grads.count("hidden"));
  CHECK(grads.at("hidden").size(1) == 32);
  CHECK(grads.at("hidden").size(0) == grads.at("heads").size(0));

  const auto summary = nlohmann::json::parse(slurp(out / "summary.json"));
  const auto& f = summary["final"];
  const auto& b = f["budget"];
  CHECK(f["method"] == "kwon");
  CHECK(b["hidden_kept"] == 24);
  CHECK(b["hidden_total"] == 32);
  CHECK(b["folded_vs_scaled_max_abs_logit_diff"].get<double>() <= 1e-5);
  CHECK(f["slim_vs_masked_max_abs_logit_diff"].get<double>() <= 1e-5);
  // The budget at width 24 by hand: a head's four projections and a neuron's two weights scale with the width
  // (biases and attention products do not), and the kept fraction is what the export's shapes cost.
  const auto cfg = nlohmann::json::parse(slurp(out / "model" / "config.json"));
  CHECK(cfg["hidden_size"] == 24);
  CHECK(cfg["head_dim"] == 8);
  CHECK(cfg["intermediate_sizes"] == b["ffn_widths"]);
  const double kept = b["kept"].get<double>();
  CHECK(kept <= 0.5 + 1e-12);
  CHECK(kept > 0.4);
  const auto& heads = b["heads_per_layer"];
  CHECK(heads.size() == 2);
  // Hugging Face: the plain class cannot build it; the modeling file does, with our logits on every example.
  CHECK_THAT(f["hf_check"]["transformers4"].get<std::string>(), Catch::StartsWith("not applicable (removed hidden"));
  if (std::filesystem::exists(HP_REF_PYTHON))
    CHECK_THAT(f["hf_check"]["transformers4_remote_code"].get<std::string>(), Catch::StartsWith("passed"));
  // The curves: at 50% each method keeps the search's 24 channels and its counts, so each is on budget (the head
  // criterion's points beside them remove heads alone).
  const auto& points = summary["budget_curves"]["points"];
  int at_half = 0;
  for (const auto& p : points) {
    if (p["kept_fraction"].get<double>() > 0.9 || p["method"].get<std::string>().rfind("heads only", 0) == 0) continue;
    INFO(p.dump());
    CHECK(p["kept_fraction"].get<double>() <= 0.5 + 1e-9);
    ++at_half;
  }
  CHECK(at_half == 7);  // the search's three steps, its recovery, Taylor, magnitude, random

  // Killed after the search: the summary and curves gone; the rerun lands on the same model.
  std::filesystem::remove(out / "summary.json");
  std::filesystem::remove(out / "budget_curves.csv");
  auto again = run_prune(args);
  INFO(again.output);
  REQUIRE(again.code == 0);
  const auto resumed = nlohmann::json::parse(slurp(out / "summary.json"));
  CHECK(resumed["final"]["budget"]["hidden_kept"] == 24);
  CHECK(resumed["final"]["metrics"] == f["metrics"]);
}
