// Sharded safetensors (#62): transformers' split (plan_shards), save_bert with max_shard_mb → load_bert giving the
// single file's tensors, the bad indexes and shards (one-line CheckpointErrors naming the file and the fix), and the
// independent reference: a checkpoint sharded by transformers' own save_pretrained loads with transformers' logits,
// and ours loads in transformers with the same logits (tools/make_sharded_reference.py, tools/hf_check.py).
#include <catch2/catch.hpp>
#include <torch/types.h>
#include <torch/utils.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/base/errors.h"
#include "core/io/checkpoint.h"
#include "core/io/safetensors_index.h"
#include "core/io/tensor_io.h"
#include "logits.h"
#include "fixtures.h"
#include "skip.h"

namespace fs = std::filesystem;
using Catch::Contains;
using hp::core::kSafetensorsIndexName;

namespace {

std::string scratch(const std::string& name) {
  const std::string dir = (hp::test::scratch_dir("hp_sharded_test_" + std::to_string(getpid())) / name).string();
  fs::remove_all(dir);
  return dir;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

torch::Tensor logits_of(const hp::core::Bert& model, const std::string& inputs_h5) {
  return hp::test::logits_on(model, inputs_h5);
}

// The tiny golden model saved in shards of 20 kB (it holds 85 kB of tensors): a fresh folder.
std::string sharded_tiny(const std::string& name) {
  const std::string dir = scratch(name);
  hp::core::save_bert(hp::core::load_bert(hp::test::kTinyBert), dir, hp::test::kTinyBert, false, 0.02);
  return dir;
}

}  // namespace

TEST_CASE("sharded: plan_shards splits as transformers' shard_checkpoint does", "[core][sharded]") {
  using hp::core::plan_shards;
  CHECK(plan_shards({5, 5, 5}, 10) == std::vector<int>{0, 0, 1});  // 5 + 5 fits; a third would take it over
  CHECK(plan_shards({5, 6}, 10) == std::vector<int>{0, 1});
  CHECK(plan_shards({20, 1}, 10) == std::vector<int>{0, 1});  // a tensor over the limit has a shard of its own
  CHECK(plan_shards({1, 20, 1}, 10) == std::vector<int>{0, 1, 2});
  CHECK(plan_shards({0, 10, 0}, 10) == std::vector<int>{0, 0, 0});  // exactly at the limit stays
  CHECK(plan_shards({7, 7, 7}, 0) == std::vector<int>{0, 0, 0});  // 0: one file
  CHECK(plan_shards({}, 10).empty());
  CHECK(hp::core::shard_file_name(2, 13) == "model-00002-of-00013.safetensors");
  CHECK(hp::core::is_shard_file_name("model-00002-of-00013.safetensors"));
  CHECK_FALSE(hp::core::is_shard_file_name("model.safetensors"));
  CHECK_FALSE(hp::core::is_shard_file_name("model-1-of-2.safetensors"));
}

TEST_CASE("sharded: save_bert with max_shard_mb writes transformers' shards, which load as the single file",
          "[core][sharded]") {
  const auto model = hp::core::load_bert(hp::test::kTinyBert);
  const std::string dir = sharded_tiny("roundtrip");
  CHECK_FALSE(fs::exists(dir + "/model.safetensors"));
  const auto index = hp::core::read_safetensors_index(dir + "/" + kSafetensorsIndexName);
  REQUIRE(index.shards.size() >= 4);
  const int n = static_cast<int>(index.shards.size());
  std::uint64_t total = 0;
  for (int k = 1; k <= n; ++k) {
    const std::string shard = hp::core::shard_file_name(k, n);
    INFO(shard);
    REQUIRE(index.shards[k - 1] == shard);
    std::uint64_t bytes = 0;
    const auto tensors = hp::core::read_safetensors(dir + "/" + shard);
    for (const auto& [name, t] : tensors) {
      bytes += t.numel() * t.element_size();
      CHECK(index.weight_map.at(name) == shard);
    }
    CHECK((bytes <= 20000 || tensors.size() == 1));
    total += bytes;
  }
  CHECK(index.total_size == total);
  // Filled in the key table's order layer by layer: the embeddings first, the classifier last, layer 0 before 1.
  const auto shard_of = [&](const std::string& name) { return index.weight_map.at(name); };
  CHECK(shard_of("bert.embeddings.word_embeddings.weight") == index.shards.front());
  CHECK(shard_of("classifier.bias") == index.shards.back());
  CHECK(shard_of("bert.encoder.layer.0.output.LayerNorm.bias") <=
        shard_of("bert.encoder.layer.1.attention.self.query.weight"));

  const auto back = hp::core::load_bert(dir);
  REQUIRE(back.parameters().size() == model.parameters().size());
  for (const auto& [k, v] : model.parameters()) {
    INFO(k);
    CHECK(torch::equal(v, back.parameters().at(k)));
  }
  CHECK(torch::equal(logits_of(model, hp::test::kTinyBertH5), logits_of(back, hp::test::kTinyBertH5)));

  // What a fingerprint of the weights hashes (the ranks' check, prune analyze's resume key): the index and the shards.
  const auto files = hp::core::weights_files(dir);
  REQUIRE(files.size() == index.shards.size() + 1);
  CHECK(files.front() == dir + "/" + kSafetensorsIndexName);
  CHECK(files.back() == dir + "/" + index.shards.back());
  CHECK(hp::core::weights_files(hp::test::kTinyBert) ==
        std::vector<std::string>{hp::test::kTinyBert + "/model.safetensors"});

  SECTION("max_shard_mb larger than the model: one model.safetensors, as transformers writes it") {
    const std::string one = scratch("one");
    hp::core::save_bert(model, one, "", false, 1.0);
    CHECK(fs::exists(one + "/model.safetensors"));
    CHECK_FALSE(fs::exists(one + "/" + kSafetensorsIndexName));
  }
}

TEST_CASE("sharded: export.dtype bf16 and fp16 store the weights at 16 bits, which load as their rounded values",
          "[core][sharded]") {
  const auto model = hp::core::load_bert(hp::test::kTinyBert);
  std::uint64_t fp32_bytes = 0;
  for (const auto& [k, v] : model.parameters()) fp32_bytes += v.numel() * v.element_size();
  for (const auto& [dtype, type, hf_name] :
       {std::tuple{"bf16", torch::kBFloat16, "bfloat16"}, std::tuple{"fp16", torch::kHalf, "float16"}}) {
    INFO(dtype);
    const std::string dir = scratch(std::string("dtype_") + dtype);
    hp::core::write_bert_files(model, dir, "", {true, 0.02, false, dtype});
    CHECK(read_json(dir + "/config.json")["torch_dtype"] == hf_name);
    const auto index = hp::core::read_safetensors_index(dir + "/" + kSafetensorsIndexName);
    CHECK(index.total_size * 2 == fp32_bytes);
    const auto h5 = hp::core::read_hdf5(dir + "/model.h5");  // HDF5 has no bf16: the stored values at fp32
    for (const auto& shard : index.shards)
      for (const auto& [name, t] : hp::core::read_safetensors(dir + "/" + shard)) {
        INFO(name);
        CHECK(t.scalar_type() == type);
        CHECK(torch::equal(h5.at(name), t.to(torch::kFloat)));
      }
    const auto back = hp::core::load_bert(dir);
    for (const auto& [k, v] : model.parameters()) {
      INFO(k);
      const auto& got = back.parameters().at(k);
      CHECK(got.scalar_type() == torch::kFloat);
      CHECK(torch::equal(got, v.to(type).to(torch::kFloat)));
    }
    const auto a = logits_of(model, hp::test::kTinyBertH5), b = logits_of(back, hp::test::kTinyBertH5);
    CHECK((a - b).abs().max().item<double>() <= 2e-2 * a.abs().max().item<double>());
  }
  const std::string fp32 = scratch("dtype_fp32");
  hp::core::write_bert_files(model, fp32);
  CHECK(read_json(fp32 + "/config.json").count("torch_dtype") == 0);  // fp32 writes none, as before
}

TEST_CASE("sharded: bad indexes and shards give one-line errors naming the file and the fix", "[core][sharded][bad]") {
  const std::string dir = sharded_tiny("bad");
  const std::string index_path = dir + "/" + kSafetensorsIndexName;
  auto index = read_json(index_path);
  const std::string word = "bert.embeddings.word_embeddings.weight";
  const std::string shard1 = index["weight_map"][word];  // model-00001-of-0000N.safetensors
  const std::string shard2 = index["weight_map"]["classifier.bias"];
  auto one_line = [](const std::string& msg) { return msg.find('\n') == std::string::npos; };
  auto load_error = [&]() -> std::string {
    try {
      hp::core::load_bert(dir);
    } catch (const hp::CheckpointError& e) {
      return e.what();
    }
    return "(loaded)";
  };
  SECTION("an index naming a shard that is missing") {
    fs::remove(dir + "/" + shard2);
    const auto msg = load_error();
    CHECK(one_line(msg));
    CHECK_THAT(msg, Contains(dir + "/" + shard2 + ": shard missing, but model.safetensors.index.json puts tensors in "
                                                  "it; download every shard the index names"));
  }
  SECTION("a tensor in the weight_map that its shard does not hold") {
    index["weight_map"]["classifier.bias"] = shard1;
    write_text(index_path, index.dump(2));
    CHECK_THAT(load_error(), Contains(dir + "/" + shard1 + ": does not hold tensor 'classifier.bias', which "
                                      "model.safetensors.index.json puts in it (" + shard2 + " does)"));
  }
  SECTION("a tensor in two shards") {
    auto t = hp::core::read_safetensors(dir + "/" + shard2);
    t[word] = hp::core::read_safetensors(dir + "/" + shard1).at(word);
    hp::core::write_safetensors(dir + "/" + shard2, t);
    CHECK_THAT(load_error(), Contains(index_path + ": tensor '" + word + "' is in two shards, " + shard1 + " and " +
                                      shard2 + "; re-download the checkpoint"));
  }
  SECTION("a tensor listed twice in weight_map") {
    std::string text = index.dump(2);
    const std::string entry = "\"" + word + "\": \"" + shard1 + "\"";
    text.replace(text.find(entry), entry.size(), entry + ",\n    \"" + word + "\": \"" + shard2 + "\"");
    write_text(index_path, text);
    CHECK_THAT(load_error(), Contains(index_path + ": tensor '" + word +
                                      "' is listed twice in weight_map (a tensor in two shards)"));
  }
  SECTION("a shard holding a tensor the index does not list") {
    index["weight_map"].erase("classifier.bias");
    write_text(index_path, index.dump(2));
    CHECK_THAT(load_error(), Contains(dir + "/" + shard2 +
                                      ": holds tensor 'classifier.bias', which model.safetensors.index.json does not list"));
  }
  SECTION("an index that is not JSON") {
    write_text(index_path, "{\"weight_map\": {");
    const auto msg = load_error();
    CHECK(one_line(msg));
    CHECK_THAT(msg, Contains(index_path + ": not valid JSON (") &&
                        Contains("; re-download the checkpoint, or save it again with save_pretrained"));
  }
  SECTION("an index without weight_map, or with one that names nothing") {
    write_text(index_path, R"({"metadata": {"total_size": 4}})");
    CHECK_THAT(load_error(), Contains(index_path + ": no weight_map (the table of which shard holds each tensor)"));
    write_text(index_path, R"({"weight_map": []})");
    CHECK_THAT(load_error(), Contains(index_path + ": weight_map is not a JSON object"));
    write_text(index_path, R"({"weight_map": {}})");
    CHECK_THAT(load_error(), Contains(index_path + ": weight_map is empty"));
    write_text(index_path, R"({"weight_map": {"a": 3}})");
    CHECK_THAT(load_error(), Contains(index_path + ": weight_map entry of tensor 'a' is 3, not a file name"));
  }
  SECTION("a shard outside the folder is refused before anything is read") {
    write_text(scratch("outside") + ".safetensors", "not read");
    for (const std::string bad : {"../outside.safetensors", "/etc/passwd", "sub/x.safetensors", "..", ""}) {
      INFO(bad);
      index["weight_map"][word] = bad;
      write_text(index_path, index.dump(2));
      CHECK_THAT(load_error(), Contains(index_path + ": weight_map puts tensor '" + word + "' in '" + bad +
                                        "', which is not a file beside the index") &&
                                   Contains("; refused; re-download the checkpoint"));
    }
  }
  SECTION("model.safetensors beside an index wins, as in transformers") {
    const std::string single = scratch("single");
    hp::core::save_bert(hp::core::load_bert(hp::test::kTinyBert), single);
    fs::copy_file(single + "/model.safetensors", dir + "/model.safetensors");
    write_text(index_path, "not json");
    hp::core::LoadReport rep;
    hp::core::load_bert(dir, {}, &rep);
    CHECK(rep.weights_file == dir + "/model.safetensors");
  }
}

TEST_CASE("sharded: transformers' shards load with its logits, and ours load in transformers", "[.hf][sharded]") {
  const std::string python = HP_REF_PYTHON;
  if (!fs::exists(python)) return hp::test::skip("no Python reference at " + python + " (scripts/setup.sh)");
  const std::string ref = scratch("hf_reference");
  const std::string make = python + " " + hp::test::kSourceDir + "/tools/make_sharded_reference.py " + ref;
  REQUIRE(std::system(make.c_str()) == 0);
  const std::string inputs = ref + "/inputs.h5";
  const auto theirs = read_json(ref + "/model/" + kSafetensorsIndexName);
  REQUIRE(theirs["weight_map"].size() > 0);
  REQUIRE(!fs::exists(ref + "/model/model.safetensors"));

  // transformers' shards → headprune: transformers' logits.
  hp::core::LoadReport rep;
  const auto model = hp::core::load_bert(ref + "/model", {}, &rep);
  CHECK(rep.weights_file == ref + "/model/" + kSafetensorsIndexName);
  const auto want = hp::core::read_hdf5(inputs).at("logits").to(torch::kFloat64);
  const double diff = (logits_of(model, inputs).to(torch::kFloat64) - want).abs().max().item<double>();
  INFO("max |headprune - transformers| = " << diff);
  CHECK(diff <= 1e-5);

  // headprune's shards at transformers' size: the same split, file for file, and transformers loads them.
  const std::string ours = scratch("ours");
  hp::core::save_bert(model, ours, "", false, 0.2);  // "200KB" in transformers: 200 * 10^3 bytes
  const auto mine = read_json(ours + "/" + kSafetensorsIndexName);
  CHECK(mine["weight_map"] == theirs["weight_map"]);
  CHECK(mine["metadata"]["total_size"] == theirs["metadata"]["total_size"]);
  const std::string check = python + " " + hp::test::kSourceDir + "/tools/hf_check.py " + ours + " " + inputs +
                            " --tol 1e-5";
  REQUIRE(std::system(check.c_str()) == 0);

  // A bf16 export (export.dtype) loads in transformers at fp32 with headprune's logits of the same folder.
  const std::string half = scratch("ours_bf16");
  hp::core::write_bert_files(model, half, "", {false, 0.2, false, "bf16"});
  auto golden = hp::core::read_hdf5(inputs);
  golden["logits"] = logits_of(hp::core::load_bert(half), inputs);
  hp::core::write_hdf5(half + ".inputs.h5", golden);
  const std::string check16 =
      python + " " + hp::test::kSourceDir + "/tools/hf_check.py " + half + " " + half + ".inputs.h5 --tol 1e-5";
  REQUIRE(std::system(check16.c_str()) == 0);
}
