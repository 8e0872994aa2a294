// The pruning run's retraining-free search over hidden channels and whole layers (`--target-flops F --structures
// heads,neurons,hidden,layers`): the hidden and layer masks' gradients scored beside the heads' and neurons', the
// channels and the layer removed from the export with the tuning scales folded in, transformers loading it
// through the modeling file, the budget spent at the narrower width, and a resumed run landing on the same model.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "cli/cli_util.h"
#include "core/io/tensor_io.h"

using hp::test::run_prune;
using hp::test::slurp;
using hp::test::tiny_prune_args;

TEST_CASE("the budget search over heads, neurons, hidden channels and layers: they leave the export, on budget, "
          "resumable",
          "[cli][prune][budget][hidden]") {
  const auto out = hp::test::scratch_dir("hp_prune_search_hidden");
  std::filesystem::remove_all(out);
  // The 4-layer tiny model; the search told which widths and layer counts to try, so that some of each go.
  std::string args = tiny_prune_args(out.string()) +
                     " --criteria taylor --target-flops 0.5 --structures heads,neurons,hidden,layers --recover-steps 2"
                     " --set train.train_split=matched --set train.eval_split=mismatched --set train.eval_every=1"
                     " --set prune.budget_schedule=[100,50] --set prune.hidden_widths=[24]"
                     " --set prune.layer_counts=[3]";
  args.replace(args.find(hp::test::kTinyBert), hp::test::kTinyBert.size(), hp::test::kTinyBertL4);
  auto r = run_prune(args);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output,
             Catch::Contains("the heads, FFN neurons, hidden channels and whole layers that fit 50.0%") &&
                 Catch::Contains("3/4 layers, ") && Catch::Contains("24/32 hidden channels"));
  const auto grads = hp::core::read_hdf5((out / "state" / "mask_gradients.h5").string());
  REQUIRE(grads.count("hidden"));
  REQUIRE(grads.count("layers"));
  CHECK(grads.at("hidden").size(1) == 32);
  CHECK(grads.at("layers").size(1) == 4);
  CHECK(grads.at("hidden").size(0) == grads.at("heads").size(0));
  // The layer that left is the one whose gate's Fisher is least.
  const auto layer_fisher = grads.at("layers").pow(2).sum(0);
  const long gone = layer_fisher.argmin().item<long>();

  const auto summary = nlohmann::json::parse(slurp(out / "summary.json"));
  const auto& f = summary["final"];
  const auto& b = f["budget"];
  CHECK(f["method"] == "kwon");
  CHECK(b["hidden_kept"] == 24);
  CHECK(b["hidden_total"] == 32);
  CHECK(b["layers_kept"] == 3);
  CHECK(b["layers_total"] == 4);
  CHECK(b["heads_per_layer"][static_cast<size_t>(gone)] == 0);
  CHECK(b["ffn_widths"][static_cast<size_t>(gone)] == 0);
  const auto choice = nlohmann::json::parse(slurp(out / "search" / "choice.json"));
  CHECK_THAT(choice["coarse_mask"].get<std::string>(), Catch::Contains("layers:" + std::to_string(gone)));
  CHECK(b["folded_vs_scaled_max_abs_logit_diff"].get<double>() <= 1e-5);
  CHECK(f["slim_vs_masked_max_abs_logit_diff"].get<double>() <= 1e-5);
  // The budget at width 24 by hand: a head's four projections and a neuron's two weights scale with the width
  // (biases and attention products do not), and the kept fraction is what the export's shapes cost.
  const auto cfg = nlohmann::json::parse(slurp(out / "model" / "config.json"));
  CHECK(cfg["hidden_size"] == 24);
  CHECK(cfg["head_dim"] == 8);
  CHECK(cfg["num_hidden_layers"] == 3);
  auto widths = b["ffn_widths"];
  widths.erase(static_cast<size_t>(gone));
  CHECK(cfg["intermediate_sizes"] == widths);
  const double kept = b["kept"].get<double>();
  CHECK(kept <= 0.5 + 1e-12);
  CHECK(kept > 0.4);
  // Hugging Face: the plain class cannot build it; the modeling file does, with our logits on every example.
  CHECK_THAT(f["hf_check"]["transformers4"].get<std::string>(), Catch::StartsWith("not applicable (removed hidden"));
  if (std::filesystem::exists(HP_REF_PYTHON))
    CHECK_THAT(f["hf_check"]["transformers4_remote_code"].get<std::string>(), Catch::StartsWith("passed"));
  // The curves: at 50% each method keeps the search's channels, layers and counts, so each is on budget; at 100%
  // too they keep 24 channels and 3 layers, the only width and count the search was given (the head criterion's
  // points beside them remove heads alone).
  const auto& points = summary["budget_curves"]["points"];
  std::map<std::string, std::vector<double>> by_method;
  for (const auto& p : points)
    if (p["method"].get<std::string>().rfind("heads only", 0) != 0 && p["method"] != "control")
      by_method[p["method"].get<std::string>()].push_back(p["kept_fraction"].get<double>());
  CHECK(by_method.size() ==
        7);  // the search's three steps, its recovery, Taylor, magnitude, random (the control aside)
  for (auto& [method, x] : by_method) {
    INFO(method);
    REQUIRE(x.size() == 2);
    std::sort(x.begin(), x.end());
    CHECK(x[0] <= 0.5 + 1e-9);
    CHECK(x[0] > 0.4);
    CHECK(x[1] < 0.75);  // at width 24 of 32 and 3 of 4 layers: 3/4 of the layers' costs, most scaled by 3/4
  }

  // The report's budget result says what went beside the heads and neurons.
  auto rep = run_prune("report " + out.string() + " --data-root " + hp::test::tiny_data_root() +
                       " --max-seq-len 32 --count 2 --out " + (out / "report.html").string());
  INFO(rep.output);
  REQUIRE(rep.code == 0);
  CHECK_THAT(slurp(out / "report.html"), Catch::Contains("hidden channels kept") && Catch::Contains("24 of 32") &&
                                             Catch::Contains("whole layers kept") && Catch::Contains("3 of 4"));

  // Killed after the search: the summary and curves gone; the rerun lands on the same model.
  std::filesystem::remove(out / "summary.json");
  std::filesystem::remove(out / "budget_curves.csv");
  auto again = run_prune(args);
  INFO(again.output);
  REQUIRE(again.code == 0);
  const auto resumed = nlohmann::json::parse(slurp(out / "summary.json"));
  CHECK(resumed["final"]["budget"]["hidden_kept"] == 24);
  CHECK(resumed["final"]["budget"]["layers_kept"] == 3);
  CHECK(resumed["final"]["metrics"] == f["metrics"]);
}
