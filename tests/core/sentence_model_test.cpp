// core/io/sentence_model: the three files of a sentence-transformers folder, as all-MiniLM-L6-v2 holds them, and each
// way they can be wrong (one line naming the file, the key and the fix).
#include "core/io/sentence_model.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "core/base/errors.h"
#include "fixtures.h"

using Catch::Matchers::Contains;
using hp::core::PoolingMode;
namespace fs = std::filesystem;

namespace {

const char* kModules =
    R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])";

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace

TEST_CASE("sentence-transformers' modules.json: types by their last name, paths inside the folder", "[core]") {
  const auto m = hp::core::parse_modules_json(kModules, "m.json");
  REQUIRE(m.size() == 3);
  CHECK(m[0].type == "Transformer");
  CHECK(m[0].path.empty());
  CHECK(m[1].type == "Pooling");
  CHECK(m[1].path == "1_Pooling");
  CHECK(m[2].type == "Normalize");
  CHECK_THROWS_WITH(hp::core::parse_modules_json("{", "m.json"), Contains("m.json: not valid JSON"));
  CHECK_THROWS_WITH(hp::core::parse_modules_json("[]", "m.json"), Contains("not a list of modules"));
  CHECK_THROWS_WITH(hp::core::parse_modules_json(R"([{"path": "../x", "type": "a.Pooling"}])", "m.json"),
                    Contains("leaves the model folder"));
  CHECK_THROWS_WITH(hp::core::parse_modules_json(R"([{"path": "/etc", "type": "a.Pooling"}])", "m.json"),
                    Contains("leaves the model folder"));
  CHECK_THROWS_WITH(hp::core::parse_modules_json(R"([{"path": ""}])", "m.json"), Contains("no \"type\""));
}

TEST_CASE("the pooling config: its modes in sentence-transformers' concatenation order", "[core]") {
  const auto p = hp::core::parse_pooling_config(
      R"({"word_embedding_dimension": 384, "pooling_mode_mean_tokens": true, "pooling_mode_cls_token": true,
          "pooling_mode_lasttoken": true, "pooling_mode_max_tokens": false, "include_prompt": false})",
      "p.json");
  CHECK(p.dimension == 384);
  CHECK(p.modes == std::vector<PoolingMode>{PoolingMode::kCls, PoolingMode::kMean, PoolingMode::kLastToken});
  CHECK_FALSE(p.include_prompt);
  CHECK_THROWS_WITH(hp::core::parse_pooling_config(R"({"word_embedding_dimension": 8})", "p.json"),
                    Contains("p.json: no pooling mode is true"));
  CHECK_THROWS_WITH(hp::core::parse_pooling_config(R"({"pooling_mode_mean_tokens": true})", "p.json"),
                    Contains("word_embedding_dimension"));
  CHECK_THROWS_WITH(
      hp::core::parse_pooling_config(R"({"word_embedding_dimension": 8, "pooling_mode_mean_tokens": 1})", "p.json"),
      Contains("\"pooling_mode_mean_tokens\" is not true or false"));
  CHECK(hp::core::parse_max_seq_length(R"({"max_seq_length": 256, "do_lower_case": false})", "s.json") == 256);
  CHECK(hp::core::parse_max_seq_length(R"({"do_lower_case": false})", "s.json") == 0);
  CHECK_THROWS_WITH(hp::core::parse_max_seq_length(R"({"max_seq_length": -3})", "s.json"),
                    Contains("not a positive integer"));
}

TEST_CASE("a sentence-transformers folder read whole; modules headprune does not compute are refused", "[core]") {
  const fs::path dir = hp::test::scratch_dir("hp_sentence_model");
  fs::remove_all(dir);
  write(dir / "modules.json", kModules);
  write(dir / "1_Pooling" / "config.json", R"({"word_embedding_dimension": 32, "pooling_mode_max_tokens": true})");
  write(dir / "sentence_bert_config.json", R"({"max_seq_length": 128})");
  CHECK(hp::core::is_sentence_model(dir.string()));
  const auto m = hp::core::read_sentence_model(dir.string());
  CHECK(m.transformer_dir == dir.string());
  CHECK(m.normalize);
  CHECK(m.max_seq_length == 128);
  CHECK(m.pooling.modes == std::vector<PoolingMode>{PoolingMode::kMax});
  CHECK(m.embedding_width() == 32);
  write(dir / "modules.json",
        R"([{"path": "", "type": "sentence_transformers.models.Transformer"},
            {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}])");
  CHECK_THROWS_WITH(hp::core::read_sentence_model(dir.string()),
                    Contains("module 2 is Dense") && Contains("Transformer -> Pooling [-> Normalize]"));
  fs::remove(dir / "modules.json");
  CHECK_FALSE(hp::core::is_sentence_model(dir.string()));
}

TEST_CASE("config_sentence_transformers.json's default prompt: the prompt its name names, or none", "[core]") {
  using hp::core::parse_default_prompt;
  const std::string where = "m/config_sentence_transformers.json";
  CHECK(parse_default_prompt(R"({"prompts": {"query": "query: ", "doc": ""}, "default_prompt_name": "query"})", where) ==
        "query: ");
  CHECK(parse_default_prompt(R"({"prompts": {"query": "query: "}, "default_prompt_name": null})", where).empty());
  CHECK(parse_default_prompt(R"({"__version__": {"sentence_transformers": "2.0.0"}})", where).empty());
  CHECK_THROWS_WITH(parse_default_prompt(R"({"prompts": {"query": "q: "}, "default_prompt_name": "doc"})", where),
                    Contains(where) && Contains("'doc', which \"prompts\" does not hold"));
  CHECK_THROWS_WITH(parse_default_prompt(R"({"prompts": {"query": 3}, "default_prompt_name": "query"})", where),
                    Contains("prompt 'query' is not a string"));
}
