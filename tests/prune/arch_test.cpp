// Every architecture besides BERT (core/model/arch.h) against Hugging Face transformers: a small random model of
// each, made by transformers in the test setup (tools/make_arch_models.py, fixture hp_arch_models), loads with
// logits equal to HF's, equal HF's head_mask when masked and HF's prune_heads when slimmed, and exports to the
// architecture's own tensor names and back.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <torch/utils.h>

#include "core/io/checkpoint.h"
#include "core/io/safetensors.h"
#include "core/io/tensor_io.h"
#include "core/kernels/lowp_gemm.h"  // Bf16Autocast
#include "core/model/arch.h"
#include "eval/evaluator.h"
#include "fixtures.h"
#include "prune/export/onnx.h"
#include "prune/export/slim.h"
#include "hf_check.h"
#include "skip.h"

namespace {

namespace fs = std::filesystem;
const std::string kArchModels = std::string(HP_BINARY_DIR) + "/arch_models/";

// The model folder of `model_type`, or "" (and a skip) when the fixture did not make it.
std::string arch_dir(const std::string& model_type) {
  const std::string dir = kArchModels + model_type;
  if (fs::exists(dir + "/reference.h5")) return dir;
  hp::test::skip(dir + " missing: run scripts/setup_python.sh, then ctest -R core.arch_models (the fixture)");
  return "";
}

torch::Tensor logits_of(const hp::core::Bert& model, const hp::core::TensorMap& ref,
                        const torch::Tensor& head_mask = {}) {
  hp::core::EncoderInput in;
  in.input_ids = ref.at("input_ids");
  in.attention_mask = ref.at("attention_mask");
  in.token_type_ids = ref.at("token_type_ids");
  in.head_mask = head_mask;
  torch::NoGradGuard no_grad;
  return model.forward(in).logits;
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

std::set<std::string> keys_of(const hp::core::TensorMap& m) {
  std::set<std::string> keys;
  for (const auto& [k, v] : m) keys.insert(k);
  return keys;
}

}  // namespace

TEST_CASE("RoBERTa, XLM-R, DistilBERT, ELECTRA: logits, head masks and slimming equal transformers", "[.arch][prune]") {
  for (const char* type : {"roberta", "xlm-roberta", "distilbert", "electra"}) {
    DYNAMIC_SECTION(type) {
      const std::string dir = arch_dir(type);
      if (dir.empty()) return;
      const auto ref = hp::core::read_hdf5(dir + "/reference.h5");
      const auto model = hp::core::load_bert(dir);
      CHECK(model.config().model_type == type);
      const auto want = ref.at("logits");
      INFO(type << ": logits " << want.sizes());
      CHECK(max_diff(logits_of(model, ref), want) <= 1e-5);
      // The signal is there: the rows differ from one another by far more than the tolerance.
      CHECK((want - want.mean(0)).abs().max().item<double>() > 1e-2);

      CHECK(max_diff(logits_of(model, ref, ref.at("head_mask")), ref.at("logits_head_mask")) <= 1e-5);

      const auto pruned = nlohmann::json::parse(hp::core::read_hdf5_attrs(dir + "/reference.h5").at("pruned"));
      hp::core::HeadSet keep(model.config().num_hidden_layers,
                             std::vector<bool>(model.config().num_attention_heads, true));
      for (auto& [layer, heads] : pruned.items())
        for (const auto& h : heads) keep[std::stoi(layer)][h.get<int>()] = false;
      const auto slim = hp::prune::slim_model(model, keep);
      CHECK(max_diff(logits_of(slim, ref), ref.at("logits_pruned")) <= 1e-5);

      // Export: the architecture's own tensor names (the same set HF saved), and the same logits back.
      const auto out = hp::test::scratch_dir(std::string("arch_export_") + type);
      fs::remove_all(out);
      hp::core::save_bert(model, out.string(), dir);
      CHECK(keys_of(hp::core::read_safetensors(out.string() + "/model.safetensors")) ==
            keys_of(hp::core::read_safetensors(dir + "/model.safetensors")));
      const auto config = nlohmann::json::parse(std::ifstream(out / "config.json"));
      CHECK(config["model_type"] == type);
      CHECK(config["architectures"][0] == hp::core::arch_of(type).classifier_class);
      CHECK(max_diff(logits_of(hp::core::load_bert(out.string()), ref), want) <= 1e-5);
    }
  }
}

TEST_CASE("RoBERTa, XLM-R, DistilBERT, ELECTRA: a training forward under bf16 autocast runs and stays near fp32",
          "[.arch_bf16][prune]") {
  // train.precision: bf16 (auto's choice where the probe measured it faster) trains every architecture: ELECTRA's
  // embedding projection once returned bf16 into the fp32 residual stream and the layers refused it.
  if (!hp::core::lowp_native(hp::core::Precision::kBf16))  // oneDNN capped below it refuses bf16 primitives
    return hp::test::skip("bf16 is not native under this CPU or HEADPRUNE_MAX_ISA");
  for (const char* type : {"roberta", "xlm-roberta", "distilbert", "electra"}) {
    DYNAMIC_SECTION(type) {
      const std::string dir = arch_dir(type);
      if (dir.empty()) return;
      const auto ref = hp::core::read_hdf5(dir + "/reference.h5");
      const auto model = hp::core::load_bert(dir);  // evaluation mode (no dropout), gradients on: training's path
      hp::core::EncoderInput in;
      in.input_ids = ref.at("input_ids");
      in.attention_mask = ref.at("attention_mask");
      in.token_type_ids = ref.at("token_type_ids");
      torch::Tensor logits;
      {
        const hp::core::Bf16Autocast autocast(true);
        logits = model.forward(in).logits.to(torch::kFloat);
      }
      const auto want = logits_of(model, ref);
      INFO(type << ": max |bf16 - fp32| " << max_diff(logits.detach(), want));
      CHECK(max_diff(logits.detach(), want) <= 0.05 * want.abs().max().item<double>() + 0.05);
    }
  }
}

TEST_CASE("RoBERTa, XLM-R, DistilBERT, ELECTRA: slimmed exports (hidden channels too) load in transformers 4 and 5 and run in ONNX Runtime",
          "[.arch][prune]") {
  const std::string py4 = HP_REF_PYTHON, py5 = HP_REF_PYTHON_V5;
  for (const char* type : {"roberta", "xlm-roberta", "distilbert", "electra"}) {
    DYNAMIC_SECTION(type) {
      const std::string dir = arch_dir(type);
      if (dir.empty()) return;
      auto ref = hp::core::read_hdf5(dir + "/reference.h5");
      const auto model = hp::core::load_bert(dir);
      const auto& cfg = model.config();
      hp::core::EncoderInput in;
      in.input_ids = ref.at("input_ids");
      in.attention_mask = ref.at("attention_mask");
      in.token_type_ids = ref.at("token_type_ids");
      torch::NoGradGuard no_grad;
      // The unpruned export: transformers 4 and 5 load it with their own class of the architecture.
      const auto fdir = hp::test::scratch_dir(std::string("arch_full_") + type);
      fs::remove_all(fdir);
      hp::core::save_bert(model, fdir.string(), dir);
      const auto full = model.forward(in).logits;
      CHECK(hp::test::hf_check(py4, fdir, in, full) == 0);
      if (fs::exists(py5)) CHECK(hp::test::hf_check(py5, fdir, in, full) == 0);
      // Heads only: transformers 4 replays pruned_heads in its own class, and the modeling file does the same
      // (every layer keeps a head: transformers' DistilBERT cannot run a layer without, the modeling file can).
      const hp::core::HeadSet some = {
          {true, false, true, false}, {false, true, false, false}, {true, true, false, true}};
      const auto heads = hp::prune::slim_model(model, some);
      const auto hdir = hp::test::scratch_dir(std::string("arch_heads_") + type);
      fs::remove_all(hdir);
      hp::core::save_bert(heads, hdir.string(), dir);
      const auto want = heads.forward(in).logits;
      CHECK(hp::test::hf_check(py4, hdir, in, want) == 0);
      CHECK(hp::test::hf_check(py4, hdir, in, want, "--remote-code") == 0);
      CHECK(hp::test::hf_check(py4, hdir, in, model.forward(in).logits, "--remote-code") != 0);  // it can fail
      // Heads, FFN neurons and hidden channels through the modeling file, layer 1's heads and layer 2's FFN gone.
      const hp::core::HeadSet keep = {
          {true, false, true, false}, {false, false, false, false}, {true, true, false, true}};
      hp::core::NeuronSet neurons(cfg.num_hidden_layers, std::vector<bool>(cfg.intermediate_size, true));
      for (int i = 0; i < cfg.intermediate_size; ++i) neurons[0][i] = i % 3 != 0, neurons[2][i] = false;
      // And every third hidden channel (with ELECTRA's embedding projection, its output rows): the masked model's
      // logits.
      std::vector<bool> hidden(static_cast<size_t>(cfg.hidden_size), true);
      for (size_t ch = 0; ch < hidden.size(); ch += 3) hidden[ch] = false;
      const auto narrow = hp::prune::slim_model(model, keep, neurons, {}, hidden);
      CHECK(narrow.config().hidden_size == cfg.hidden_size - (cfg.hidden_size + 2) / 3);
      auto masked_in = in;
      masked_in.head_mask = hp::eval::head_mask_tensor(keep);
      masked_in.neuron_mask = hp::eval::neuron_mask_tensor(neurons);
      masked_in.hidden_mask = hp::eval::hidden_mask_tensor(hidden);
      const auto ndir = hp::test::scratch_dir(std::string("arch_neurons_") + type);
      fs::remove_all(ndir);
      hp::core::save_bert(narrow, ndir.string(), dir);
      const auto nwant = narrow.forward(in).logits;
      CHECK(max_diff(nwant, model.forward(masked_in).logits) <= 1e-5);
      CHECK(hp::test::hf_check(py4, ndir, in, nwant, "--remote-code") == 0);
      if (fs::exists(py5)) {
        CHECK(hp::test::hf_check(py5, hdir, in, want, "--remote-code") == 0);
        CHECK(hp::test::hf_check(py5, ndir, in, nwant, "--remote-code") == 0);
      } else {
        WARN("transformers 5 not checked: no " << py5 << " (scripts/setup_python.sh --v5)");
      }
      hp::prune::export_onnx(narrow, ndir.string());  // throws when ONNX Runtime's logits differ by > 1e-4
      CHECK(fs::file_size(ndir / "model.onnx") > 1000);
    }
  }
}
