// train.precision: auto through the CLI: the dispatch probe's training choice (cached in HEADPRUNE_CACHE) decides
// bf16 or fp32, the log says which and why, and config.resolved.yaml records what ran. The cache's timings are
// written by the test, so no outcome depends on this CPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "skip.h"

using namespace hp::test;
namespace fs = std::filesystem;

namespace {

// `prune train` of the tiny model for two steps with the dispatch cache in `cache`, into `out`.
Run tiny_train(const fs::path& cache, const fs::path& out, const std::string& env = "") {
  fs::remove_all(out);
  return run_command(env + " HEADPRUNE_CACHE=" + cache.string() + " " + HP_PRUNE_EXE + " train --model " + kTinyBert +
                     " --task mnli_subset --data-root " + tiny_data_root() +
                     " --max-seq-len 32 --set train.train_split=matched --set train.eval_split=mismatched "
                     "--set train.max_steps=2 --set train.batch_size=4 --set eval.batch_size=8 --out " +
                     out.string());
}

// The precision config.resolved.yaml of a training run records.
std::string resolved_precision(const fs::path& out) {
  const std::string yaml = slurp(out / "config.resolved.yaml");
  const auto at = yaml.find("precision: ", yaml.find("train:"));
  if (at == std::string::npos) return "";
  std::string value = yaml.substr(at + 11, yaml.find_first_of(" \n", at + 11) - at - 11);  // up to its comment
  value.erase(std::remove(value.begin(), value.end(), '"'), value.end());
  return value;
}

// Every entry of the dispatch cache given these training timings (ms).
void set_training_times(const fs::path& file, double fp32_ms, double bf16_ms) {
  auto all = nlohmann::json::parse(slurp(file));
  for (auto& [key, d] : all.items()) d["training"] = {{"fp32_ms", fp32_ms}, {"bf16_ms", bf16_ms}};
  std::ofstream(file) << all.dump(2);
}

}  // namespace

TEST_CASE("train.precision auto trains at what the dispatch probe measured faster, and says why",
          "[cli][train][dispatch]") {
  const auto root = scratch_dir("hp_train_precision");
  fs::remove_all(root);
  const auto cache = root / "cache";
  fs::create_directories(cache);
  // The first run probes this machine and writes the cache; whatever it chose is logged and recorded.
  auto r = tiny_train(cache, root / "probed");
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("train.precision auto: "));
  const std::string first = resolved_precision(root / "probed");
  CHECK((first == "fp32" || first == "bf16"));
  REQUIRE(fs::exists(cache / "dispatch.json"));
  // bf16 measured twice as fast: bf16, with the ratio in the log; measured slower: fp32. (Under HEADPRUNE_MAX_ISA
  // oneDNN refuses bf16 primitives, and nothing is probed: the capped case below.)
  const char* cap = std::getenv("HEADPRUNE_MAX_ISA");
  if (cap != nullptr && *cap != '\0') return hp::test::skip("HEADPRUNE_MAX_ISA is set: a bf16 training would be refused");
  struct Case {
    double fp32_ms, bf16_ms;
    std::string precision, log;
  };
  for (const Case& c : {Case{8.0, 4.0, "bf16", "bf16: the dispatch probe measured training's bf16 products at x2.00 "
                                               "the speed of fp32's (4 ms vs 8 ms)"},
                        Case{8.0, 14.0, "fp32", "fp32: the dispatch probe measured training's bf16 products at x0.57"}}) {
    set_training_times(cache / "dispatch.json", c.fp32_ms, c.bf16_ms);
    r = tiny_train(cache, root / c.precision);
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.output, Catch::Contains("train.precision auto: " + c.log));
    CHECK(resolved_precision(root / c.precision) == c.precision);
  }
  // An explicit precision is not replaced.
  r = run_command("HEADPRUNE_CACHE=" + cache.string() + " " + HP_PRUNE_EXE + " train --model " + kTinyBert +
                  " --task mnli_subset --data-root " + tiny_data_root() + " --precision fp32 --dump-config");
  CHECK(r.output.find("train.precision auto") == std::string::npos);
  // Without a bf16 path under the cap nothing is timed: fp32, and the log says why.
  const auto capped = root / "capped_cache";
  fs::create_directories(capped);
  r = tiny_train(capped, root / "capped", "HEADPRUNE_MAX_ISA=avx2");
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("train.precision auto: fp32: this CPU has no native bf16 products"));
  CHECK(resolved_precision(root / "capped") == "fp32");
}
