// Checkpoint folders: save → load round trips, Hugging Face loading our export, and the bad-input
// catalogue (each a one-line CheckpointError naming the file and the fix).
#include <catch2/catch.hpp>
#include <unistd.h>  // getpid
#include <torch/types.h>
#include <torch/utils.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/io/checkpoint.h"
#include "core/base/errors.h"
#include "core/io/tensor_io.h"
#include "logits.h"
#include "fixtures.h"

namespace fs = std::filesystem;
using Catch::Contains;

namespace {

using hp::test::kTinyBert;
using hp::test::kTinyBertH5;

// A fresh copy of the tiny golden model folder.
std::string copy_tiny(const std::string& name) {
  std::string dir = (hp::test::scratch_dir("hp_ckpt_test_" + std::to_string(getpid())) / name).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(kTinyBert))
    fs::copy_file(e.path(), dir + "/" + e.path().filename().string());
  return dir;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

void write_json(const std::string& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(2); }

torch::Tensor logits_of(const hp::core::Bert& model) { return hp::test::logits_on(model, kTinyBertH5); }

}  // namespace

TEST_CASE("save_bert then load_bert gives the same tensors and logits", "[core][checkpoint]") {
  auto model = hp::core::load_bert(kTinyBert);
  std::string out = copy_tiny("roundtrip_src") + "_out";
  hp::core::save_bert(model, out, kTinyBert);
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"})
    CHECK(fs::exists(out + "/" + f));
  auto back = hp::core::load_bert(out);
  for (const auto& [k, v] : model.parameters()) {
    INFO(k);
    CHECK(torch::equal(v, back.parameters().at(k)));
  }
  CHECK(torch::equal(logits_of(model), logits_of(back)));
  auto j = read_json(out + "/config.json");
  CHECK(j["architectures"][0] == "BertForSequenceClassification");
  CHECK(j["num_hidden_layers"] == 2);
  CHECK(j["heads_per_layer"] == nlohmann::json::array({4, 4}));
  // HF's layout: encoder keys under "bert.", classifier at the top.
  auto saved = hp::core::read_safetensors(out + "/model.safetensors");
  CHECK(saved.count("bert.encoder.layer.1.attention.self.query.weight") == 1);
  CHECK(saved.count("classifier.weight") == 1);
}

TEST_CASE("Hugging Face transformers loads our export with equal logits", "[.hf][checkpoint]") {
  auto model = hp::core::load_bert(kTinyBert);
  std::string out = copy_tiny("hf_src") + "_out";
  hp::core::save_bert(model, out, kTinyBert);
  std::string cmd =
      std::string(HP_REF_PYTHON) + " " + hp::test::kSourceDir + "/tools/hf_check.py " + out + " " + kTinyBertH5;
  REQUIRE(std::system(cmd.c_str()) == 0);
}

TEST_CASE("bad checkpoint folders give one-line errors naming the file and the fix", "[core][checkpoint][bad]") {
  SECTION("missing folder") {
    REQUIRE_THROWS_WITH(hp::core::load_bert("/nonexistent/model"),
                        Contains("/nonexistent/model: model folder not found") && Contains("--model"));
  }
  SECTION("config.json without a required key") {
    auto dir = copy_tiny("no_key");
    auto j = read_json(dir + "/config.json");
    j.erase("num_attention_heads");
    write_json(dir + "/config.json", j);
    REQUIRE_THROWS_WITH(hp::core::load_bert(dir),
                        Contains("config.json: required key 'num_attention_heads' is missing"));
  }
  SECTION("unsupported model_type") {
    auto dir = copy_tiny("deberta");
    auto j = read_json(dir + "/config.json");
    j["model_type"] = "deberta-v2";
    write_json(dir + "/config.json", j);
    REQUIRE_THROWS_WITH(hp::core::load_bert(dir),
                        Contains("model_type 'deberta-v2' is not supported; headprune loads bert, roberta, "
                                 "xlm-roberta, distilbert, electra encoders"));
  }
  SECTION("a BERT checkpoint under another model_type: no tensors under that architecture's prefixes") {
    auto dir = copy_tiny("bert_as_electra");
    auto j = read_json(dir + "/config.json");
    j["model_type"] = "electra";
    write_json(dir + "/config.json", j);
    REQUIRE_THROWS_WITH(hp::core::load_bert(dir), Contains("no embeddings.word_embeddings.weight under any known "
                                                           "prefix (electra., none, 0.auto_model.); config.json's "
                                                           "model_type is 'electra' (ELECTRA)"));
  }
  SECTION("config.json that is not JSON") {
    auto dir = copy_tiny("badjson");
    std::ofstream(dir + "/config.json") << "{ not json";
    REQUIRE_THROWS_WITH(hp::core::load_bert(dir), Contains("config.json: invalid JSON"));
  }
  SECTION("no weights file") {
    auto dir = copy_tiny("noweights");
    fs::remove(dir + "/model.safetensors");
    REQUIRE_THROWS_WITH(hp::core::load_bert(dir), Contains("no model.safetensors, model.safetensors.index.json or pytorch_model.bin"));
  }
  SECTION("tensor shape mismatch names both shapes") {
    auto dir = copy_tiny("shape");
    auto t = hp::core::read_safetensors(dir + "/model.safetensors");
    t["bert.encoder.layer.1.intermediate.dense.weight"] = torch::zeros({36, 32});
    hp::core::write_safetensors(dir + "/model.safetensors", t);
    REQUIRE_THROWS_WITH(
        hp::core::load_bert(dir),
        Contains("bert.encoder.layer.1.intermediate.dense.weight has shape [36, 32], expected [37, 32]"));
  }
  SECTION("missing tensors are listed") {
    auto dir = copy_tiny("missing");
    auto t = hp::core::read_safetensors(dir + "/model.safetensors");
    t.erase("bert.encoder.layer.0.attention.self.key.bias");
    hp::core::write_safetensors(dir + "/model.safetensors", t);
    REQUIRE_THROWS_WITH(hp::core::load_bert(dir),
                        Contains("missing required tensors bert.encoder.layer.0.attention.self.key.bias") &&
                            Contains("prefix found: 'bert.'"));
  }
  SECTION("unexpected tensors are named") {
    auto dir = copy_tiny("unexpected");
    auto t = hp::core::read_safetensors(dir + "/model.safetensors");
    t["bert.encoder.layer.0.adapter.weight"] = torch::zeros({2, 2});
    hp::core::write_safetensors(dir + "/model.safetensors", t);
    REQUIRE_THROWS_WITH(hp::core::load_bert(dir),
                        Contains("1 unexpected tensors (bert.encoder.layer.0.adapter.weight)"));
  }
  SECTION("classifier with another number of labels than the task") {
    hp::core::LoadOptions opts;
    opts.num_labels = 2;
    REQUIRE_THROWS_WITH(hp::core::load_bert(kTinyBert, opts),
                        Contains("classifier.weight has 3 labels, the task needs 2"));
    // prune.new_classifier: the stored classifier dropped, a fresh 2-label one made, the encoder kept.
    opts.new_classifier = true;
    hp::core::LoadReport rep;
    const auto fresh = hp::core::load_bert(kTinyBert, opts, &rep);
    CHECK(rep.classifier_initialized);
    CHECK(fresh.config().num_labels == 2);
    const auto stored = hp::core::load_bert(kTinyBert);
    for (const auto& [name, w] : stored.parameters())
      if (name.rfind("classifier", 0) != 0) CHECK(torch::equal(fresh.parameters().at(name), w));
    CHECK(fresh.parameters().at("classifier.weight").size(0) == 2);
    opts.num_labels = 3;  // the stored classifier fits: kept
    CHECK(torch::equal(hp::core::load_bert(kTinyBert, opts).parameters().at("classifier.weight"),
                       stored.parameters().at("classifier.weight")));
  }
  SECTION("pruned_heads outside the model") {
    auto dir = copy_tiny("pruned");
    auto j = read_json(dir + "/config.json");
    j["pruned_heads"] = {{"5", {0}}};
    write_json(dir + "/config.json", j);
    REQUIRE_THROWS_WITH(hp::core::load_bert(dir), Contains("pruned_heads names layer 5 head 0"));
  }
  SECTION("intermediate_sizes: one per layer, within intermediate_size, matching the tensors") {
    auto dir = copy_tiny("widths");
    auto j = read_json(dir + "/config.json");
    j["intermediate_sizes"] = {37};
    write_json(dir + "/config.json", j);
    REQUIRE_THROWS_WITH(hp::core::load_bert(dir), Contains("intermediate_sizes has 1 entries for 2 layers"));
    j["intermediate_sizes"] = {37, 38};
    write_json(dir + "/config.json", j);
    REQUIRE_THROWS_WITH(hp::core::load_bert(dir), Contains("intermediate_sizes[1] = 38 is outside 0..37"));
    j["intermediate_sizes"] = {37, 20};  // the tensors still have 37 neurons
    write_json(dir + "/config.json", j);
    REQUIRE_THROWS_WITH(hp::core::load_bert(dir), Contains("encoder.layer.1.intermediate.dense.weight"));
  }
}

TEST_CASE("a checkpoint without a classifier gets a fresh one, reproducibly", "[core][checkpoint]") {
  auto dir = copy_tiny("nocls");
  auto t = hp::core::read_safetensors(dir + "/model.safetensors");
  t.erase("classifier.weight");
  t.erase("classifier.bias");
  hp::core::write_safetensors(dir + "/model.safetensors", t);
  hp::core::LoadOptions opts;
  opts.num_labels = 5;
  opts.seed = 7;
  hp::core::LoadReport report;
  auto a = hp::core::load_bert(dir, opts, &report);
  CHECK(report.classifier_initialized);
  CHECK(a.config().num_labels == 5);
  auto b = hp::core::load_bert(dir, opts);
  CHECK(torch::equal(a.parameters().at("classifier.weight"), b.parameters().at("classifier.weight")));
  // HF's initializer: normal(0, 0.02) weights, zero bias.
  CHECK(a.parameters().at("classifier.weight").std().item<double>() == Approx(0.02).margin(0.01));
  CHECK(a.parameters().at("classifier.bias").abs().sum().item<double>() == 0.0);
}
