// The `prune` executable end to end: exit codes, one-line errors naming the key/file and the fix,
// --version, and an evaluation on the tiny golden model whose JSON must agree with the HF golden logits.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <torch/torch.h>

#include "core/tensor_io.h"

namespace {

struct Run {
  int code;
  std::string output;  // stdout + stderr
};

Run run_prune(const std::string& args) {
  std::string cmd = std::string(HP_PRUNE_EXE) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

const std::string kTiny = std::string(HP_SOURCE_DIR) + "/tests/data/golden/tiny_bert";

}  // namespace

TEST_CASE("prune --version names LibTorch, the BLAS kernel and threads", "[cli]") {
  auto r = run_prune("--version");
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("LibTorch 1.13"));
  CHECK_THAT(r.output, Catch::Contains("BLAS OpenBLAS (kernel "));
  CHECK_THAT(r.output, Catch::Contains("threads "));
  CHECK_THAT(r.output, !Catch::Contains("Prescott"));
}

TEST_CASE("bad input: one-line error, non-zero exit, no crash", "[cli][bad]") {
  struct Case {
    std::string args, expect;
    int code;
  };
  std::vector<Case> cases = {
      {"eval --model " + kTiny + " --task sst3", "unknown task 'sst3'", 2},
      {"eval --model /nonexistent --task sst2", "/nonexistent: model folder not found", 1},
      {"eval --model " + kTiny + " --task mnli_subset --max-seq-len 64 --mask 9:0", "layer 9 is out of range", 2},
      {"eval --model " + kTiny + " --task mnli_subset", "data.max_seq_len = 128 exceeds the model's max_position_embeddings 64", 2},
      {"eval --model " + kTiny + " --task sst2 --max-seq-len 64", "classifier.weight has 3 labels, the task needs 2", 1},
      {"eval --model " + kTiny + " --task sst2 --set eval.bach_size=2", "did you mean 'eval.batch_size'", 2},
      {"eval --model " + kTiny + " --task sst2 --batch 0", "eval.batch_size = 0", 2},
      {"eval --model " + kTiny + " --task sst2 --data-root /nonexistent", "/nonexistent", 1},
      {"eval --config /nonexistent.yaml", "cannot open config file", 2},
      {"infer --model " + kTiny + " --input /nonexistent.txt", "/nonexistent.txt: cannot read", 1},
  };
  for (const auto& c : cases) {
    INFO("prune " << c.args);
    auto r = run_prune(c.args);
    CHECK(r.code == c.code);
    CHECK_THAT(r.output, Catch::Contains("error: ") && Catch::Contains(c.expect));
    CHECK_THAT(r.output, !Catch::Contains("terminate called") && !Catch::Contains("Segmentation"));
  }
}

TEST_CASE("prune eval with the tiny model writes a JSON result", "[cli]") {
  // The tiny model has 3 labels; RTE has 2, so use a 3-label task: the MNLI subset.
  std::string out = "/tmp/hp_cli_eval_" + std::to_string(getpid()) + ".json";
  auto r = run_prune("eval --model " + kTiny + " --task mnli_subset --max-seq-len 64 --max-examples 40 --batch 16 --mask 1:0,2 --output " + out);
  INFO(r.output);
  REQUIRE(r.code == 0);
  std::ifstream in(out);
  auto j = nlohmann::json::parse(in);
  CHECK(j["examples"] == 40);
  CHECK(j["heads_kept"] == 6);
  CHECK(j["mask"] == "1:0,2");
  double acc = j["metrics"]["accuracy"];
  // 40 examples: the accuracy is a multiple of 1/40.
  CHECK(acc * 40 == Approx(std::round(acc * 40)).margin(1e-9));
}

TEST_CASE("prune infer reproduces HF's logits from raw text", "[cli][parity]") {
  const std::string golden = std::string(HP_SOURCE_DIR) + "/tests/data/golden/tiny_bert.h5";
  auto a = hp::core::read_hdf5_strings(golden, "text_a");
  auto b = hp::core::read_hdf5_strings(golden, "text_b");
  std::string input = "/tmp/hp_cli_infer_" + std::to_string(getpid()) + ".txt";
  {
    std::ofstream f(input);
    for (size_t i = 0; i < a.size(); ++i) f << a[i] << (b[i].empty() ? "" : "\t" + b[i]) << "\n";
  }
  auto r = run_prune("infer --model " + kTiny + " --max-seq-len 64 --input " + input + " --output " + input + ".h5 --hidden");
  INFO(r.output);
  REQUIRE(r.code == 0);
  auto ours = hp::core::read_hdf5(input + ".h5");
  auto ref = hp::core::read_hdf5(golden);
  CHECK((ours.at("logits") - ref.at("logits")).abs().max().item<double>() <= 1e-4);
  CHECK(torch::equal(ours.at("lengths"), ref.at("attention_mask").sum(1)));
  CHECK(ours.at("last_hidden").size(2) == 32);
}

TEST_CASE("prune export writes an HF folder and an HDF5 file with the same tensors", "[cli]") {
  std::string out = "/tmp/hp_cli_export_" + std::to_string(getpid());
  auto r = run_prune("export --model " + kTiny + " --to " + out);
  INFO(r.output);
  REQUIRE(r.code == 0);
  auto st = hp::core::read_safetensors(out + "/model.safetensors");
  auto h5 = hp::core::read_hdf5(out + "/model.h5");
  auto src = hp::core::read_safetensors(kTiny + "/model.safetensors");
  REQUIRE(st.size() == src.size());
  REQUIRE(h5.size() == st.size());
  for (const auto& [k, v] : src) {
    INFO(k);
    CHECK(torch::equal(st.at(k), v));
    CHECK(torch::equal(h5.at(k), v));
  }
}

TEST_CASE("configs/README.md is the current output of prune config --doc", "[cli]") {
  auto r = run_prune("config --doc");
  REQUIRE(r.code == 0);
  std::ifstream in(std::string(HP_SOURCE_DIR) + "/configs/README.md");
  std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO("regenerate configs/README.md from `prune config --doc` (see its header)");
  CHECK_THAT(readme, Catch::EndsWith(r.output));
}

TEST_CASE("every preset in configs/ loads and validates", "[cli]") {
  for (const char* name : {"sst2", "mrpc", "cola", "rte", "stsb", "mnli"}) {
    INFO(name);
    auto r = run_prune(std::string("train --dump-config --config ") + HP_SOURCE_DIR + "/configs/" + name + ".yaml");
    CHECK(r.code == 0);
    CHECK_THAT(r.output, Catch::Contains("task: "));
  }
}
