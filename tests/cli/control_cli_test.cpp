// The final model's reference (prune/stages/control.h): a run whose final model recovered also trains the
// unpruned model as many steps (the control) and reports its difference from the better of the two on the selection
// slice; prune.control: false leaves the control out and says so.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "fixtures.h"

using hp::test::run_prune;
using hp::test::slurp;
using hp::test::tiny_prune_args;

namespace fs = std::filesystem;

TEST_CASE("the final model against the better of the unpruned model and the control trained as long as it",
          "[cli][prune][control]") {
  const auto out = hp::test::scratch_dir("hp_prune_control");
  fs::remove_all(out);
  const std::string args =
      tiny_prune_args(out.string()) + " --target-heads 3 --method taylor --set prune.criteria=[taylor] --recover-steps 6"
      " --set train.eval_every=3 --set train.train_split=matched";
  auto r = run_prune(args);
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto summary = nlohmann::json::parse(slurp(out / "summary.json"));
  const auto& ref = summary["final"]["reference"];
  // The control trained exactly as long as the final model's recovery, read from the run.
  const long steps = nlohmann::json::parse(slurp(out / "recover" / "train_result.json"))["steps"].get<long>();
  REQUIRE(steps == 6);
  CHECK(nlohmann::json::parse(slurp(out / "control" / "train_result.json"))["steps"].get<long>() == steps);
  CHECK(ref["control_steps"].get<long>() == steps);
  CHECK_THAT(r.output, Catch::Contains("the control: the unpruned model trained 6 steps, as long as the final model"));
  // The unpruned model's figure is prune eval's of the model the run started from.
  const std::string eval_json = (out.parent_path() / "hp_prune_control_eval.json").string();
  fs::remove(eval_json);  // an earlier build's result (another config) is refused, not replaced
  auto e = run_prune("eval --model " + hp::test::kTinyBert + " --task mnli_subset --max-seq-len 32 --data-root " +
                     hp::test::tiny_data_root() + " --split mismatched --output " + eval_json);
  INFO(e.output);
  REQUIRE(e.code == 0);
  const std::string metric = summary["metric"].get<std::string>();
  CHECK(ref["unpruned"].get<double>() ==
        Approx(100 * nlohmann::json::parse(slurp(eval_json))["metrics"][metric].get<double>()));
  // The reference is the better on the slice, the unpruned model on a tie; the difference is taken from it.
  const bool control_better = ref["control_select"].get<double>() > ref["unpruned_select"].get<double>();
  CHECK(ref["reference"] == (control_better ? "control" : "unpruned"));
  const double from = control_better ? ref["control"].get<double>() : ref["unpruned"].get<double>();
  CHECK(ref["delta"].get<double>() == Approx(100 * summary["final"]["metrics"][metric].get<double>() - from));
  CHECK_THAT(r.output, Catch::Contains(" from the ") && Catch::Contains("after 6 steps"));

  // prune.control: false: no control trained, the result line says so.
  const auto off = hp::test::scratch_dir("hp_prune_control_off");
  fs::remove_all(off);
  std::string off_args = args;
  off_args.replace(off_args.find(out.string()), out.string().size(), off.string());
  auto o = run_prune(off_args + " --set prune.control=false");
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK(!fs::exists(off / "control"));
  const auto off_ref = nlohmann::json::parse(slurp(off / "summary.json"))["final"]["reference"];
  CHECK(off_ref["control_steps"] == 0);
  CHECK(off_ref["reference"] == "unpruned");
  CHECK_THAT(o.output, Catch::Contains(", no control)"));
}

TEST_CASE("the result line says how long the unpruned model was fine-tuned, where its training run is beside it",
          "[cli][prune][control]") {
  const auto out = hp::test::scratch_dir("hp_prune_reference_trained");
  fs::remove_all(out);
  // A `prune train` run's folder as the model: 30 training rows in batches of 8 are 4 steps an epoch.
  const std::string data = " --task mnli_subset --data-root " + hp::test::tiny_data_root() + " --max-seq-len 32";
  auto t = run_prune("train --model " + hp::test::kTinyBert + data +
                     " --set train.train_split=matched --set train.eval_split=mismatched --set train.batch_size=8"
                     " --max-steps 6 --set train.eval_every=2 --out " +
                     (out / "ft").string());
  INFO(t.output);
  REQUIRE(t.code == 0);
  const auto tr = nlohmann::json::parse(slurp(out / "ft" / "train_result.json"));
  CHECK(tr["steps_per_epoch"].get<long>() == 4);
  const long best = tr["best_step"].get<long>();
  REQUIRE((best == 2 || best == 4 || best == 6));
  const std::string epochs = best == 2 ? "0.5 epoch" : best == 4 ? "1 epoch" : "1.5 epochs";
  std::string args = tiny_prune_args((out / "run").string()) + " --target-heads 3 --method taylor" +
                     " --set prune.criteria=[taylor] --recover-steps 0";
  args.replace(args.find(hp::test::kTinyBert), hp::test::kTinyBert.size(), (out / "ft" / "best").string());
  auto r = run_prune(args);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains(" after " + epochs + " (step " + std::to_string(best) + " of 6), no control)"));
  // The metric in points, as the reference: the final model's figure is the reference's plus the difference.
  const auto summary = nlohmann::json::parse(slurp(out / "run" / "summary.json"));
  const double metric = summary["final"]["metrics"][summary["metric"].get<std::string>()].get<double>();
  char points[32];
  std::snprintf(points, sizeof points, ": %s %.4g (", summary["metric"].get<std::string>().c_str(), 100 * metric);
  CHECK_THAT(r.output, Catch::Contains(points));
}
