// `prune explain` (analysis/explain.h) against the Python reference: the attention attribution of every
// layer (HF transformers with the layer's probabilities replaced by α·A, float64) and Hao's tree built
// from it, on a random 4-layer model and six examples (tests/golden/make_tree_goldens.py).
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/explain.h"
#include "core/io/checkpoint.h"
#include "core/data/glue.h"
#include "core/text/tokenizer.h"
#include "fixtures.h"
#include "skip.h"

TEST_CASE("prune explain: attribution per layer and the tree equal the Python reference", "[explain][golden]") {
  std::ifstream f(hp::test::kTreeGolden);
  if (!f) return hp::test::skip(hp::test::kTreeGolden + " missing: run tests/golden/make_tree_goldens.py");
  const auto g = nlohmann::json::parse(f);
  const std::string dir = hp::test::kSourceDir + "/" + g["model"].get<std::string>();  // relative to the repository
  hp::core::LoadOptions load;
  load.num_labels = 3;
  const auto model = hp::core::load_bert(dir, load);
  const auto tok = hp::core::Tokenizer::from_model_dir(dir);
  for (const auto& ex : g["examples"]) {
    hp::core::Example e;
    e.text_a = ex["text_a"], e.text_b = ex["text_b"];
    INFO(e.text_a << " | " << e.text_b);
    const auto x = hp::analysis::explain_example(model, tok, e, 64, g["steps"], "right", false, g["threshold"]);
    CHECK(x.tokens == ex["tokens"].get<std::vector<std::string>>());
    CHECK(x.target == ex["target"].get<int>());
    const auto att = ex["attribution"].get<std::vector<hp::analysis::Matrix>>();
    REQUIRE(x.attribution.size() == att.size());
    double worst = 0, scale = 0;
    for (size_t l = 0; l < att.size(); ++l)
      for (size_t i = 0; i < att[l].size(); ++i)
        for (size_t j = 0; j < att[l].size(); ++j) {
          worst = std::max(worst, std::abs(x.attribution[l][i][j] - att[l][i][j]));
          scale = std::max(scale, std::abs(att[l][i][j]));
        }
    CHECK(worst <= 1e-5 * std::max(1.0, scale));
    CHECK(x.tree.root == ex["root"].get<int>());
    REQUIRE(x.tree.edges.size() == ex["edges"].size());
    for (size_t k = 0; k < x.tree.edges.size(); ++k) {
      CHECK(x.tree.edges[k].layer == ex["edges"][k][0].get<int>());
      CHECK(x.tree.edges[k].from == ex["edges"][k][1].get<int>());
      CHECK(x.tree.edges[k].to == ex["edges"][k][2].get<int>());
    }
  }
}
