// Every command on every architecture besides BERT (issue #28): the small random RoBERTa, XLM-R, DistilBERT and
// ELECTRA models that transformers made in the test setup (tools/make_arch_models.py, fixture hp_arch_models) go
// through a full pruning run (all criteria, exactly N heads, recovery, export, the Hugging Face checks), analyze
// (with the architecture's own special tokens), explain, a FLOPs-budget training run with gates, evaluation at
// every precision, and the report.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "cli_util.h"
#include "skip.h"

namespace {

namespace fs = std::filesystem;
using hp::test::run_prune;
using hp::test::slurp;
using hp::test::tiny_data_root;

std::string arch_model(const std::string& type) {
  const std::string dir = std::string(HP_BINARY_DIR) + "/arch_models/" + type;
  if (fs::exists(dir + "/reference.h5")) return dir;
  hp::test::skip(dir + " missing: run scripts/setup_python.sh, then ctest -R core.arch_models (the fixture)");
  return "";
}

nlohmann::json json_of(const fs::path& p) { return nlohmann::json::parse(slurp(p)); }

}  // namespace

TEST_CASE("every command on RoBERTa, XLM-R, DistilBERT and ELECTRA", "[.arch][cli]") {
  for (const char* type : {"roberta", "xlm-roberta", "distilbert", "electra"}) {
    DYNAMIC_SECTION(type) {
      const std::string model = arch_model(type);
      if (model.empty()) return;
      const fs::path out = hp::test::scratch_dir(std::string("hp_arch_cli_") + type);
      fs::remove_all(out);
      const std::string data = " --task mnli_subset --max-seq-len 32 --data-root " + tiny_data_root();
      const bool roberta_like = std::string(type).find("roberta") != std::string::npos;

      // The pruning run: every criterion's curve, 6 of 12 heads, recovery, the export and its checks.
      auto r = run_prune("--model " + model + data + " --out " + (out / "run").string() +
                         " --set prune.rank_split=matched --set prune.eval_split=mismatched --rank-examples 12"
                         " --schedule 0,25,50,75,100 --set prune.attattr_steps=3 --set prune.bootstrap=50"
                         " --set prune.latency=false --set eval.batch_size=8 --set prune.rank_batch_size=4"
                         " --target-heads 6 --method taylor --recover-steps 2"
                         " --set train.train_split=matched --set train.eval_split=mismatched");
      INFO(r.output);
      REQUIRE(r.code == 0);
      const auto summary = json_of(out / "run" / "summary.json");
      const auto& f = summary["final"];
      CHECK(f["heads_kept"] == 6);
      CHECK(f["slim_vs_masked_max_abs_logit_diff"].get<double>() <= 1e-5);
      for (const char* c : {"confidence", "lrp", "taylor", "attattr", "random", "loo"})
        CHECK(summary["criteria"][c]["curve"].size() == 5);
      CHECK_THAT(f["hf_check"]["transformers4_remote_code"].get<std::string>(), Catch::StartsWith("passed"));
      const std::string own = f["hf_check"]["transformers4"].get<std::string>();
      CHECK((own.rfind("passed", 0) == 0 || own.find("cannot run a layer without heads") != std::string::npos));
      const auto cfg = json_of(out / "run" / "model" / "config.json");
      CHECK(cfg["model_type"] == type);
      int pruned = 0;
      for (auto& [layer, heads] : cfg["pruned_heads"].items()) pruned += static_cast<int>(heads.size());
      CHECK(pruned == 6);

      // Evaluation of the export at every precision.
      for (const char* precision : {"fp32", "bf16", "int8"}) {
        const auto e =
            run_prune("eval --model " + (out / "run" / "model").string() + data + " --split mismatched --precision " +
                      precision + " --output " + (out / (std::string("eval_") + precision + ".json")).string());
        INFO(e.output);
        CHECK(e.code == 0);
      }

      // analyze: Clark's statistics read the architecture's own specials (<s> and </s> for RoBERTa and XLM-R).
      auto a = run_prune("analyze --model " + model + data + " --split mismatched --examples 12 --batch 4 --out " +
                         (out / "analysis").string());
      INFO(a.output);
      REQUIRE(a.code == 0);
      const auto an = json_of(out / "analysis" / "analysis.json");
      double cls = 0, sep = 0;
      for (const auto& layer : an["stats"]["attn_cls"])
        for (const auto& v : layer) cls += v.get<double>();
      for (const auto& layer : an["stats"]["attn_sep"])
        for (const auto& v : layer) sep += v.get<double>();
      CHECK(cls > 0.05);  // random weights still put some attention on the first and the separator tokens
      CHECK(sep > 0.05);

      // explain: the tree starts at the architecture's first special token.
      auto x = run_prune("explain --model " + model + data + " --split mismatched --steps 4 --example 1 --out " +
                         (out / "explain").string());
      INFO(x.output);
      REQUIRE(x.code == 0);
      CHECK(json_of(out / "explain" / "tree.json")["tokens"][0] == (roberta_like ? "<s>" : "[CLS]"));

      // A FLOPs-budget training run with gates over heads, neurons and sublayers, then its mask exported.
      auto t = run_prune("train --model " + model + data +
                         " --set train.train_split=matched --set train.eval_split=mismatched --target-flops 0.5"
                         " --max-steps 4 --out " +
                         (out / "gated").string());
      INFO(t.output);
      REQUIRE(t.code == 0);
      auto m = run_prune("export --model " + (out / "gated" / "best").string() + " --mask " +
                         (out / "gated" / "head_mask.txt").string() + " --to " + (out / "gated_slim").string());
      INFO(m.output);
      CHECK(m.code == 0);
      CHECK(json_of(out / "gated_slim" / "config.json")["model_type"] == type);

      // The report of the run, offline HTML.
      auto p = run_prune("report " + (out / "run").string() + " " + (out / "analysis").string() + " --data-root " +
                         tiny_data_root() + " --max-seq-len 32 --out " + (out / "report").string());
      INFO(p.output);
      CHECK(p.code == 0);
    }
  }
}
