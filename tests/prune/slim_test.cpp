// prune/export/slim.h: a slimmed model computes what the masked model computes, survives save/load (our
// loader and Hugging Face's, which re-prunes from config.pruned_heads), and shrinks parameters and FLOPs.
#include <catch2/catch.hpp>

#include "fixtures.h"
#include "skip.h"
#include <torch/types.h>
#include <torch/utils.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <utility>

#include "core/io/checkpoint.h"
#include "core/base/files.h"
#include "core/base/process.h"
#include "core/io/tensor_io.h"
#include "eval/evaluator.h"
#include "eval/flops.h"
#include "eval/latency.h"
#include "core/base/errors.h"
#include "prune/export/onnx.h"
#include "prune/export/slim.h"
#include "gates/structure_gates.h"
#include "hf_check.h"
#include "onnx_check.h"

namespace {

using hp::test::kTinyBert;
using hp::test::kTinyBertH5;

hp::core::EncoderInput golden_input(hp::core::TensorMap& g) {
  hp::core::EncoderInput in;
  in.input_ids = g.at("input_ids");
  in.token_type_ids = g.at("token_type_ids");
  in.attention_mask = g.at("attention_mask");
  return in;
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

// MiniLM with a fresh classifier (seed 42: the checks are of the encoder's arithmetic) and 3 synthetic examples of
// 40 tokens, the second padded after 30; empty (the test skipped) when MiniLM is absent.
std::optional<std::pair<hp::core::Bert, hp::core::EncoderInput>> minilm_and_input() {
  if (!std::filesystem::exists(hp::test::kMiniLM + "/config.json")) {
    hp::test::skip("MiniLM is absent (" + hp::test::kMiniLM + "); run scripts/setup.sh");
    return std::nullopt;
  }
  hp::core::LoadOptions lo;
  lo.num_labels = 2;
  auto model = hp::core::load_bert(hp::test::kMiniLM, lo);
  auto in = hp::eval::synthetic_input(model.config(), 3, 40, 7);
  in.attention_mask[1].slice(0, 30).fill_(0);
  return std::make_pair(std::move(model), in);
}

}  // namespace

TEST_CASE("slimmed model logits equal the masked model's, before and after save/load", "[prune][slim]") {
  auto g = hp::core::read_hdf5(kTinyBertH5);
  auto model = hp::core::load_bert(kTinyBert);
  torch::NoGradGuard no_grad;
  // Layer 0 loses heads 1 and 3; layer 1 loses all four (attention block = output bias only).
  hp::core::HeadSet keep = {{true, false, true, false}, {false, false, false, false}};
  auto in = golden_input(g);
  hp::core::EncoderInput masked_in = in;
  masked_in.head_mask = hp::eval::head_mask_tensor(keep);
  auto masked = model.forward(masked_in).logits;
  auto slim = hp::prune::slim_model(model, keep);
  CHECK(slim.config().heads_in_layer(0) == 2);
  CHECK(slim.config().heads_in_layer(1) == 0);
  CHECK(slim.config().pruned_heads.at(0) == std::vector<int>{1, 3});
  CHECK(slim.parameters().at("encoder.layer.0.attention.self.query.weight").size(0) == 2 * 8);
  CHECK(slim.parameters().at("encoder.layer.0.attention.output.dense.weight").size(1) == 2 * 8);
  CHECK(max_abs_diff(slim.forward(in).logits, masked) <= 1e-5);
  CHECK(max_abs_diff(masked, model.forward(in).logits) > 1e-3);  // the mask matters
  CHECK(hp::eval::parameter_count(slim.config()) < hp::eval::parameter_count(model.config()));
  CHECK(hp::eval::forward_flops(slim.config(), 1, 16) < hp::eval::forward_flops(model.config(), 1, 16));

  // Slimming a slimmed model again maps positions back to the original head indices.
  auto slimmer = hp::prune::slim_model(slim, {{true, false}, {}});
  CHECK(slimmer.config().pruned_heads.at(0) == std::vector<int>{1, 2, 3});
  hp::core::EncoderInput in2 = in;
  in2.head_mask = hp::eval::head_mask_tensor({{true, false, false, false}, {false, false, false, false}});
  CHECK(max_abs_diff(slimmer.forward(in).logits, model.forward(in2).logits) <= 1e-5);
  // ... also when the kept head is not the first one left: position 1 of the slimmed layer is head 2.
  auto second = hp::prune::slim_model(slim, {{false, true}, {}});
  CHECK(second.config().pruned_heads.at(0) == std::vector<int>{0, 1, 3});
  CHECK(second.config().kept_heads(0) == std::vector<int>{2});
  in2.head_mask = hp::eval::head_mask_tensor({{false, false, true, false}, {false, false, false, false}});
  CHECK(max_abs_diff(second.forward(in).logits, model.forward(in2).logits) <= 1e-5);
  CHECK(max_abs_diff(second.forward(in).logits, slimmer.forward(in).logits) > 1e-4);  // head 0 ≠ head 2

  const auto dir = hp::test::scratch_dir("hp_slim_test");
  std::filesystem::remove_all(dir);
  hp::core::save_bert(slim, dir.string(), kTinyBert);
  auto back = hp::core::load_bert(dir.string());
  CHECK(back.config().heads_in_layer(0) == 2);
  CHECK(max_abs_diff(back.forward(in).logits, masked) <= 1e-5);

  // The folder carries its modeling code for transformers 5, named by config.json's auto_map.
  CHECK(std::filesystem::exists(dir / "modeling_headprune.py"));
  CHECK(hp::core::read_file((dir / "config.json").string())
            .find("modeling_headprune.HeadpruneBertForSequenceClassification") != std::string::npos);

  // transformers 4 loads it both ways (re-pruning from pruned_heads; through the modeling file) with our logits.
  const std::string py = HP_REF_PYTHON;
  if (!std::filesystem::exists(py))
    return hp::test::skip("the Hugging Face check: no Python reference at " + py + " (scripts/setup.sh installs it)");
  CHECK(hp::test::hf_check(py, dir, in, masked) == 0);
  CHECK(hp::test::hf_check(py, dir, in, masked, "--remote-code") == 0);
  CHECK(hp::test::hf_check(py, dir, in, model.forward(in).logits, "--remote-code") != 0);  // the check can fail
}

TEST_CASE("a checkpoint pruned by Hugging Face's own prune_heads loads and equals the masked model",
          "[prune][slim][hf]") {
  const std::string py = HP_REF_PYTHON;
  if (!std::filesystem::exists(py))
    return hp::test::skip("no Python reference at " + py + " (scripts/setup_python.sh)");
  const auto dir = hp::test::scratch_dir("hp_hf_pruned");
  std::filesystem::remove_all(dir);
  // HF removes the rows and columns and records config.pruned_heads; layer 1 keeps heads 1 and 3 (the
  // kept heads are not the first positions).
  const std::string cmd = py + " -c \"import transformers as t; m = t.BertForSequenceClassification.from_pretrained('" +
                          kTinyBert + "'); m.prune_heads({0: [2], 1: [0, 2]}); m.save_pretrained('" + dir.string() +
                          "')\"";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::filesystem::copy_file(kTinyBert + "/vocab.txt", dir / "vocab.txt");
  auto g = hp::core::read_hdf5(kTinyBertH5);
  auto model = hp::core::load_bert(kTinyBert);
  auto pruned = hp::core::load_bert(dir.string());
  CHECK(pruned.config().kept_heads(0) == std::vector<int>{0, 1, 3});
  CHECK(pruned.config().kept_heads(1) == std::vector<int>{1, 3});
  torch::NoGradGuard no_grad;
  auto in = golden_input(g);
  auto masked = in;
  masked.head_mask = hp::eval::head_mask_tensor({{true, true, false, true}, {false, true, false, true}});
  CHECK(max_abs_diff(pruned.forward(in).logits, model.forward(masked).logits) <= 1e-5);
  CHECK(max_abs_diff(pruned.forward(in).logits, model.forward(in).logits) > 1e-3);
}

TEST_CASE("transformers 5 loads the slimmed export, narrow and 0-width FFNs too, through its modeling file (optional venv)",
          "[prune][slim][.hf5]") {
  const std::string py = HP_REF_PYTHON_V5;
  if (!std::filesystem::exists(py))
    return hp::test::skip_optional("no transformers 5 reference at " + py + " (scripts/setup_python.sh --v5 makes it, ~6 GB)");
  // A venv that setup is still installing (or whose install was interrupted) is not one to test against.
  if (const auto why = hp::core::python_reference_incomplete(py, hp::core::PythonRef::kTransformers5); !why.empty())
    return hp::test::skip_optional(why + "; rerun scripts/setup.sh --v5");
  auto g = hp::core::read_hdf5(kTinyBertH5);
  auto model = hp::core::load_bert(kTinyBert);
  torch::NoGradGuard no_grad;
  const auto in = golden_input(g);
  // Heads and FFN neurons: layer 0 keeps every third neuron, layer 1 none (its FFN sublayer skipped).
  hp::core::NeuronSet neurons(2);
  for (int i = 0; i < model.config().intermediate_size; ++i) neurons[0].push_back(i % 3 == 0), neurons[1].push_back(false);
  const auto slim =
      hp::prune::slim_model(model, {{true, false, true, false}, {false, false, false, false}}, neurons);
  REQUIRE(slim.config().ffn_width(0) == (model.config().intermediate_size + 2) / 3);
  REQUIRE(slim.config().ffn_width(1) == 0);
  const auto dir = hp::test::scratch_dir("hp_slim_v5_test");
  std::filesystem::remove_all(dir);
  hp::core::save_bert(slim, dir.string(), kTinyBert);
  CHECK(hp::test::hf_check(py, dir, in, slim.forward(in).logits, "--remote-code") == 0);
  // Without the modeling file, transformers 5 cannot build the narrower layers.
  std::filesystem::remove(dir / "modeling_headprune.py");
  CHECK(hp::test::hf_check(py, dir, in, slim.forward(in).logits, "--remote-code") != 0);
  // The dense fallback loads in its own BERT, no remote code.
  hp::core::save_bert(hp::prune::dense_model(slim), dir.string(), kTinyBert);
  CHECK(hp::test::hf_check(py, dir, in, slim.forward(in).logits) == 0);
}

TEST_CASE("dense export: original shapes, removed heads zeroed, the slimmed model's logits; HF loads it plainly",
          "[prune][slim][dense]") {
  auto g = hp::core::read_hdf5(kTinyBertH5);
  auto model = hp::core::load_bert(kTinyBert);
  torch::NoGradGuard no_grad;
  hp::core::HeadSet keep = {{true, false, true, false}, {false, false, false, false}};
  auto in = golden_input(g);
  const auto slim = hp::prune::slim_model(model, keep);
  const auto dense = hp::prune::dense_model(slim);
  CHECK(dense.config().pruned_heads.empty());
  for (const auto& [name, t] : model.parameters()) CHECK(dense.parameters().at(name).sizes() == t.sizes());
  const auto want = slim.forward(in).logits;
  CHECK(max_abs_diff(dense.forward(in).logits, want) <= 1e-5);
  // Kept heads keep their weights at their original rows; removed heads' value rows and output columns are 0.
  const auto& v = dense.parameters().at("encoder.layer.0.attention.self.value.weight");
  CHECK(max_abs_diff(v.narrow(0, 2 * 8, 8),
                     model.parameters().at("encoder.layer.0.attention.self.value.weight").narrow(0, 2 * 8, 8)) == 0);
  CHECK(v.narrow(0, 1 * 8, 8).abs().sum().item<double>() == 0);
  CHECK(dense.parameters().at("encoder.layer.1.attention.output.dense.weight").abs().sum().item<double>() == 0);
  // An unpruned model comes back unchanged.
  CHECK(max_abs_diff(hp::prune::dense_model(model).forward(in).logits, model.forward(in).logits) == 0);

  const auto dir = hp::test::scratch_dir("hp_dense_test");
  std::filesystem::remove_all(dir);
  hp::core::save_bert(slim, dir.string(), kTinyBert);  // then overwritten: no stale modeling file
  hp::core::save_bert(dense, dir.string(), kTinyBert);
  CHECK(hp::core::read_bert_config((dir / "config.json").string()).pruned_heads.empty());
  CHECK(max_abs_diff(hp::core::load_bert(dir.string()).forward(in).logits, want) <= 1e-5);
  CHECK(!std::filesystem::exists(dir / "modeling_headprune.py"));  // plain BERT: no remote code
  CHECK(hp::core::read_file((dir / "config.json").string()).find("auto_map") == std::string::npos);
  const std::string py = HP_REF_PYTHON;
  if (!std::filesystem::exists(py)) return hp::test::skip("the Hugging Face check: no Python reference at " + py);
  CHECK(hp::test::hf_check(py, dir, in, want) == 0);
}

TEST_CASE("ONNX export of a slimmed model: ONNX Runtime gives headprune's logits", "[prune][slim][onnx]") {
  auto model = hp::core::load_bert(kTinyBert);
  const auto slim = hp::prune::slim_model(model, {{true, false, true, false}, {false, true, false, false}});
  const auto dir = hp::test::scratch_dir("hp_onnx_test");
  std::filesystem::remove_all(dir);
  hp::core::save_bert(slim, dir.string(), kTinyBert);
  try {
    hp::prune::export_onnx(slim, dir.string());
  } catch (const hp::InputError& e) {
    return hp::test::skip(std::string("the ONNX check: ") + e.what());
  }
  CHECK(std::filesystem::file_size(dir / "model.onnx") > 1000);
  CHECK(!std::filesystem::exists(dir / "onnx_check.h5"));
  // FFN neurons too (a budget run's export): per-layer widths through the modeling file, layer 1 with none.
  hp::core::NeuronSet neurons(2, std::vector<bool>(37, false));
  for (int i = 0; i < 37; ++i) neurons[0][i] = i % 4 != 0;
  const auto narrow = hp::prune::slim_model(model, {{true, false, true, false}, {true, true, false, true}}, neurons);
  const auto ndir = hp::test::scratch_dir("hp_onnx_neurons_test");
  std::filesystem::remove_all(ndir);
  hp::core::save_bert(narrow, ndir.string(), kTinyBert);
  hp::prune::export_onnx(narrow, ndir.string());  // throws when ONNX Runtime's logits differ by > 1e-4
  CHECK(std::filesystem::file_size(ndir / "model.onnx") > 1000);
}

TEST_CASE("int8 ONNX export of a slimmed model: ONNX Runtime runs headprune's int8 scheme, same predictions",
          "[prune][slim][onnx][lowp]") {
  auto model = hp::core::load_bert(kTinyBert);
  hp::core::NeuronSet neurons(2, std::vector<bool>(37, false));
  for (int i = 0; i < 37; ++i) neurons[0][i] = i % 4 != 0;  // layer 1 keeps no neuron: no FFN product there
  const auto slim = hp::prune::slim_model(model, {{true, false, true, false}, {true, true, false, true}}, neurons);
  const auto dir = hp::test::scratch_dir("hp_onnx_int8_test");
  std::filesystem::remove_all(dir);
  hp::core::save_bert(slim, dir.string(), kTinyBert);
  const auto data = hp::test::int8_check_data(slim, 300);
  hp::core::BatchOptions bo;
  bo.batch_size = 32;
  const auto& task = hp::core::find_task("mnli_subset");
  const auto batches = hp::core::make_batches(data, bo);
  hp::prune::Int8ExportCheck check;
  try {
    hp::prune::export_onnx(slim, dir.string());
    check = hp::prune::export_onnx_int8(slim, dir.string(), task, data, batches);  // throws when the check fails
  } catch (const hp::InputError& e) {
    return hp::test::skip(std::string("the ONNX check: ") + e.what());
  }
  CHECK(std::filesystem::file_size(dir / "model.int8.onnx") > 1000);
  CHECK(!std::filesystem::exists(dir / "onnx_int8_check.h5"));
  CHECK(!std::filesystem::exists(dir / "onnx_int8_logits.h5"));
  // Both int8 models have the portable weights (±63), so the check compares the same arithmetic on any CPU: ONNX
  // Runtime's AVX2 and VNNI kernels and headprune's oneDNN paths all sum these products exactly in int32, and the
  // models differ only where float32 rounding moves an activation across a step of its row's int8 grid.
  INFO("agreement " << check.agreement << ", max |logit difference| " << check.max_abs_logit_diff);
  CHECK(check.weight_max == 63);
  CHECK(check.examples == 300);
  CHECK(check.agreement >= 0.995);
  const double fp32_max = check.tolerance / hp::prune::kInt8LogitTolerance;
  CHECK(check.max_abs_logit_diff <= 0.02 * fp32_max);
  CHECK(check.fp32.at("accuracy") == 1.0);  // labelled by it
  CHECK(check.int8.at("accuracy") > 0.9);
  CHECK(std::abs(check.onnx_int8.at("accuracy") - check.int8.at("accuracy")) <= 0.005);

  // The file's weights are within ±63 (and say so), so no u8·s8 pair sum of ONNX Runtime's AVX2 kernel can
  // saturate, and on real activations the numpy model of that kernel equals the exact product.
  const auto report = hp::test::avx2_model_report(dir / "model.int8.onnx", slim.config().vocab_size);
  if (report.is_null()) return hp::test::skip("tools/ort_avx2_model.py did not run");
  INFO(report.dump());
  CHECK(report.at("weight_max_metadata") == "63");
  CHECK(report.at("weights").at("max_abs_weight").get<int>() <= 63);
  CHECK(report.at("weights").at("worst_pair_sum").get<int>() <= 32767);
  CHECK(report.at("activations").at("saturated_pair_sums").get<long>() == 0);
  CHECK(report.at("pass").get<bool>());
}

TEST_CASE("FFN neurons: masked model = slimmed model = its saved folder = HF (remote code) = dense export",
          "[prune][slim][neurons]") {
  auto g = hp::core::read_hdf5(kTinyBertH5);
  auto model = hp::core::load_bert(kTinyBert);
  torch::NoGradGuard no_grad;
  const auto in = golden_input(g);
  // Layer 0 keeps heads 0 and 2 and the neurons i % 3 != 1 (25 of 37, not a prefix); layer 1 keeps every head
  // and no neuron (its FFN block is the output bias and LayerNorm only).
  const hp::core::HeadSet heads = {{true, false, true, false}, {true, true, true, true}};
  hp::core::NeuronSet neurons(2, std::vector<bool>(37, false));
  for (int i = 0; i < 37; ++i) neurons[0][i] = i % 3 != 1;
  auto masked_in = in;
  masked_in.head_mask = hp::eval::head_mask_tensor(heads);
  masked_in.neuron_mask = hp::eval::neuron_mask_tensor(neurons);
  const auto masked = model.forward(masked_in).logits;
  const auto slim = hp::prune::slim_model(model, heads, neurons);
  CHECK(slim.config().intermediate_sizes == std::vector<int>{25, 0});
  CHECK(slim.parameters().at("encoder.layer.0.intermediate.dense.weight").sizes() == torch::IntArrayRef({25, 32}));
  CHECK(slim.parameters().at("encoder.layer.0.intermediate.dense.bias").size(0) == 25);
  CHECK(slim.parameters().at("encoder.layer.0.output.dense.weight").sizes() == torch::IntArrayRef({32, 25}));
  CHECK(slim.parameters().at("encoder.layer.1.output.dense.weight").sizes() == torch::IntArrayRef({32, 0}));
  // Kept neuron 2 is slimmed position 1 (neuron 1 is gone): its row of the first matrix moved up.
  CHECK(max_abs_diff(slim.parameters().at("encoder.layer.0.intermediate.dense.weight")[1],
                     model.parameters().at("encoder.layer.0.intermediate.dense.weight")[2]) == 0);
  CHECK(max_abs_diff(slim.forward(in).logits, masked) <= 1e-5);
  masked_in.neuron_mask = torch::Tensor();
  CHECK(max_abs_diff(masked, model.forward(masked_in).logits) > 1e-3);  // the neuron mask matters
  CHECK(hp::eval::parameter_count(slim.config()) ==
        hp::eval::parameter_count(hp::prune::slim_model(model, heads).config()) - (12 + 37) * 65);

  const auto dir = hp::test::scratch_dir("hp_slim_neurons");
  std::filesystem::remove_all(dir);
  hp::core::save_bert(slim, dir.string(), kTinyBert);
  CHECK(hp::core::read_bert_config((dir / "config.json").string()).intermediate_sizes == std::vector<int>{25, 0});
  CHECK(max_abs_diff(hp::core::load_bert(dir.string()).forward(in).logits, masked) <= 1e-5);
  const auto dense = hp::prune::dense_model(slim);
  CHECK(dense.config().intermediate_sizes.empty());
  for (const auto& [name, t] : model.parameters()) CHECK(dense.parameters().at(name).sizes() == t.sizes());
  CHECK(max_abs_diff(dense.forward(in).logits, masked) <= 1e-5);
  CHECK(dense.parameters().at("encoder.layer.1.intermediate.dense.weight").abs().sum().item<double>() == 0);

  const std::string py = HP_REF_PYTHON;
  if (!std::filesystem::exists(py)) return hp::test::skip("the Hugging Face check: no Python reference at " + py);
  CHECK(hp::test::hf_check(py, dir, in, masked, "--remote-code") == 0);
  CHECK(hp::test::hf_check(py, dir, in, masked) != 0);  // HF's own BERT has one FFN width: it cannot build these layers
  const auto dense_dir = hp::test::scratch_dir("hp_slim_neurons_dense");
  std::filesystem::remove_all(dense_dir);
  hp::core::save_bert(dense, dense_dir.string(), kTinyBert);
  CHECK(hp::test::hf_check(py, dense_dir, in, masked) == 0);
}

TEST_CASE("FFN neurons on MiniLM: masked = slimmed = saved = HF (remote code) = dense export, 0-width sublayers",
          "[prune][slim][neurons][minilm]") {
  auto mi = minilm_and_input();
  if (!mi) return;
  const auto& [model, in] = *mi;
  const auto& c = model.config();
  torch::NoGradGuard no_grad;  // padding in one example
  // Heads: every other head, none in layer 5 (its attention sublayer skipped); neurons: a scattered set in
  // even layers, a prefix in odd ones, none in layer 3 (its FFN sublayer skipped).
  hp::core::HeadSet heads(c.num_hidden_layers, std::vector<bool>(c.num_attention_heads, false));
  hp::core::NeuronSet neurons(c.num_hidden_layers, std::vector<bool>(c.intermediate_size, false));
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    for (int h = 0; h < c.num_attention_heads; ++h) heads[l][h] = l != 5 && (h + l) % 2 == 0;
    for (int i = 0; i < c.intermediate_size; ++i) neurons[l][i] = l != 3 && (l % 2 == 0 ? i % 5 != 2 : i < 700);
  }
  auto masked_in = in;
  masked_in.head_mask = hp::eval::head_mask_tensor(heads);
  masked_in.neuron_mask = hp::eval::neuron_mask_tensor(neurons);
  const auto masked = model.forward(masked_in).logits;
  const auto slim = hp::prune::slim_model(model, heads, neurons);
  CHECK(slim.config().intermediate_sizes == std::vector<int>{1229, 700, 1229, 0, 1229, 700});
  CHECK(slim.config().heads_in_layer(5) == 0);
  CHECK(max_abs_diff(slim.forward(in).logits, masked) <= 1e-4);
  CHECK(max_abs_diff(model.forward(in).logits, masked) > 1e-3);  // the masks matter
  const auto dir = hp::test::scratch_dir("hp_slim_neurons_minilm");
  std::filesystem::remove_all(dir);
  hp::core::save_bert(slim, dir.string(), hp::test::kMiniLM);
  CHECK(max_abs_diff(hp::core::load_bert(dir.string()).forward(in).logits, masked) <= 1e-4);
  const auto dense = hp::prune::dense_model(slim);
  for (const auto& [name, t] : model.parameters()) CHECK(dense.parameters().at(name).sizes() == t.sizes());
  CHECK(max_abs_diff(dense.forward(in).logits, masked) <= 1e-4);

  const std::string py = HP_REF_PYTHON;
  if (!std::filesystem::exists(py)) return hp::test::skip("the Hugging Face check: no Python reference at " + py);
  CHECK(hp::test::hf_check(py, dir, in, masked, "--remote-code") == 0);
  const auto dense_dir = hp::test::scratch_dir("hp_slim_neurons_minilm_dense");
  std::filesystem::remove_all(dense_dir);
  hp::core::save_bert(dense, dense_dir.string(), hp::test::kMiniLM);
  CHECK(hp::test::hf_check(py, dense_dir, in, masked) == 0);
}

TEST_CASE("a closed sublayer gate removes its whole sublayer from the export (CoFi's coarse masks)",
          "[prune][slim][gates]") {
  auto g = hp::core::read_hdf5(kTinyBertH5);
  auto model = hp::core::load_bert(kTinyBert);
  const auto in = golden_input(g);
  hp::core::GateConfig gc;
  gc.target_flops = 0.5;
  hp::gates::StructureGates gates(gc, 2, 4, 37);
  torch::NoGradGuard no_grad;
  gates.named().at("mha_log_alpha")[0] = -8.0;  // layer 0's attention sublayer closed
  gates.named().at("ffn_log_alpha")[1] = -8.0;  // layer 1's FFN sublayer closed
  const auto costs = hp::eval::unit_costs(model.config(), false, 8.0);
  const double total = hp::eval::total_cost(model.config(), costs);
  // The budget of everything but those two sublayers: the structure on it drops exactly them.
  const auto keep = gates.keep_within(costs, total - 4 * costs.head - 37 * costs.neuron);
  CHECK(keep.heads == hp::core::HeadSet{{false, false, false, false}, {true, true, true, true}});
  CHECK(hp::core::count_kept({keep.neurons[0]}) == 37);
  CHECK(hp::core::count_kept({keep.neurons[1]}) == 0);
  // The gated forward (deterministic gates) already has those sublayers at exactly 0: removing them changes nothing
  // the coarse gates have not.
  auto gated_in = in, hard_in = in;
  const auto d = gates.deterministic();
  gated_in.head_mask = d.heads, gated_in.neuron_mask = d.neurons;
  hard_in.head_mask = d.heads.clone(), hard_in.neuron_mask = d.neurons.clone();
  hard_in.head_mask[0] = 0.0, hard_in.neuron_mask[1] = 0.0;
  CHECK(max_abs_diff(model.forward(gated_in).logits, model.forward(hard_in).logits) == 0);

  const auto slim = hp::prune::slim_model(model, keep.heads, keep.neurons);
  CHECK(slim.config().heads_in_layer(0) == 0);
  CHECK(slim.config().intermediate_sizes == std::vector<int>{37, 0});
  CHECK(slim.parameters().at("encoder.layer.0.attention.self.query.weight").size(0) == 0);
  auto masked_in = in;
  masked_in.head_mask = hp::eval::head_mask_tensor(keep.heads);
  masked_in.neuron_mask = hp::eval::neuron_mask_tensor(keep.neurons);
  const auto masked = model.forward(masked_in).logits;
  CHECK(max_abs_diff(slim.forward(in).logits, masked) <= 1e-5);
  const auto dir = hp::test::scratch_dir("hp_slim_sublayers");
  std::filesystem::remove_all(dir);
  hp::core::save_bert(slim, dir.string(), kTinyBert);
  const auto saved = hp::core::read_bert_config((dir / "config.json").string());
  CHECK(saved.heads_in_layer(0) == 0);
  CHECK(saved.intermediate_sizes == std::vector<int>{37, 0});
  const std::string py = HP_REF_PYTHON;
  if (!std::filesystem::exists(py)) return hp::test::skip("the Hugging Face check: no Python reference at " + py);
  CHECK(hp::test::hf_check(py, dir, in, masked, "--remote-code") == 0);
}

TEST_CASE("a closed layer gate removes its layer from the export, renumbered; the gated forward already skipped it",
          "[prune][slim][gates][layers]") {
  auto g = hp::core::read_hdf5(kTinyBertH5);
  auto model = hp::core::load_bert(kTinyBert);
  const auto in = golden_input(g);
  hp::core::GateConfig gc;
  gc.target_flops = 0.5;
  gc.layer_gates = true;
  hp::gates::StructureGates gates(gc, 2, 4, 37);
  torch::NoGradGuard no_grad;
  gates.named().at("layer_log_alpha")[0] = -8.0;  // layer 0 closed
  const auto costs = hp::eval::unit_costs(model.config(), false, 8.0);
  const double total = hp::eval::total_cost(model.config(), costs);
  const auto keep = gates.keep_within(costs, total);  // the whole budget: only the closed layer goes
  CHECK(keep.layers == std::vector<bool>{false, true});
  CHECK(hp::core::count_kept(keep.heads) == 4);
  // The gated forward (test-time gates) has layer 0's gate at exactly 0: that layer is already the identity.
  auto gated_in = in;
  const auto d = gates.deterministic();
  gated_in.head_mask = d.heads, gated_in.neuron_mask = d.neurons, gated_in.layer_mask = d.layers;
  gated_in.want_hidden = true;
  const auto gated = model.forward(gated_in);
  CHECK(d.layers[0].item<double>() == 0);
  CHECK(max_abs_diff(gated.hidden_states[1], gated.hidden_states[0]) == 0);
  CHECK(max_abs_diff(gated.hidden_states[2], gated.hidden_states[1]) > 1e-3);

  const auto slim = hp::prune::slim_model(model, keep.heads, keep.neurons, keep.layers);
  CHECK(slim.config().num_hidden_layers == 1);
  CHECK(max_abs_diff(slim.parameters().at("encoder.layer.0.output.LayerNorm.bias"),
                     model.parameters().at("encoder.layer.1.output.LayerNorm.bias")) == 0);
  auto masked_in = in;
  masked_in.head_mask = hp::eval::head_mask_tensor(keep.heads);
  masked_in.neuron_mask = hp::eval::neuron_mask_tensor(keep.neurons);
  masked_in.layer_mask = hp::eval::layer_mask_tensor(keep.layers);
  CHECK(max_abs_diff(slim.forward(in).logits, model.forward(masked_in).logits) <= 1e-5);
}

TEST_CASE("calibrated int8 on a slimmed model with an empty attention and an empty FFN: logits near float32",
          "[prune][slim][lowp]") {
  // The frontier's 40%-FLOPs SST-2 candidate had such sublayers: calibration stopped with LibTorch's amax() error.
  torch::NoGradGuard no_grad;
  const auto model = hp::core::load_bert(kTinyBert);
  hp::core::NeuronSet neurons(2, std::vector<bool>(37, true));
  neurons[0].assign(37, false);  // layer 1: no FFN neuron
  auto slim = hp::prune::slim_model(model, {{true, false, true, false}, {false, false, false, false}}, neurons);
  hp::core::EncoderInput in;
  torch::manual_seed(3);
  in.input_ids = torch::randint(5, slim.config().vocab_size, {4, 16});
  in.attention_mask = torch::ones({4, 16}, torch::kLong);
  const auto fp32 = slim.forward(in).logits;
  slim.set_precision(hp::core::Precision::kInt8);
  slim.calibrate_int8([&] { slim.forward(in); });
  REQUIRE(slim.int8_calibrated());
  const auto int8 = slim.forward(in).logits;
  const double err = (int8 - fp32).pow(2).mean().sqrt().item<double>();
  const double scale = fp32.pow(2).mean().sqrt().item<double>();
  INFO("RMS error " << err << " against RMS logit " << scale);
  CHECK(err > 0);
  CHECK(err < 0.05 * scale);
}

namespace {

// The removed-layers case on MiniLM, up to its two saved folders: the slimmed export (`dir`) and the dense one
// (`dense_dir`), and the masked model's logits both must give on `in`. Empty (the test skipped) without MiniLM.
struct LayersExport {
  hp::core::EncoderInput in;
  torch::Tensor masked;
  std::filesystem::path dir, dense_dir;
};

std::optional<LayersExport> layers_export() {
  auto mi = minilm_and_input();
  if (!mi) return std::nullopt;
  const auto& [model, in] = *mi;
  const auto& c = model.config();
  torch::NoGradGuard no_grad;
  // Layers 1 and 4 removed; layer 2 loses head 3, layer 5 its odd heads and every fifth neuron, layer 3 keeps
  // a 700-neuron prefix. After renumbering: 0 ← 0, 1 ← 2, 2 ← 3, 3 ← 5.
  const auto m = hp::core::parse_mask("layers:1,4;2:3;5:1,3,5,7,9,11", c.num_hidden_layers, c.num_attention_heads,
                                      c.intermediate_size);
  auto neurons = m.neurons;
  for (int i = 0; i < c.intermediate_size; ++i) neurons[3][i] = i < 700, neurons[5][i] = i % 5 != 2;
  auto masked_in = in;
  masked_in.head_mask = hp::eval::head_mask_tensor(m.heads);
  masked_in.neuron_mask = hp::eval::neuron_mask_tensor(neurons);
  masked_in.layer_mask = hp::eval::layer_mask_tensor(m.layers);
  const auto masked = model.forward(masked_in).logits;
  auto no_layers = masked_in;
  no_layers.layer_mask = torch::Tensor();
  CHECK(max_abs_diff(model.forward(no_layers).logits, masked) > 1e-3);  // the layer mask matters
  // The gate's interpolation x + z·(layer(x) − x) at z = 0 with a gradient is the skip, and z has a gradient.
  auto soft_in = masked_in;
  soft_in.layer_mask = masked_in.layer_mask.clone().requires_grad_(true);
  {
    torch::AutoGradMode grad_on(true);
    const auto soft = model.forward(soft_in).logits;
    CHECK(max_abs_diff(soft, masked) <= 1e-5);
    soft.sum().backward();
    CHECK(soft_in.layer_mask.grad().abs().sum().item<double>() > 0);
  }

  const auto slim = hp::prune::slim_model(model, m.heads, neurons, m.layers);
  CHECK(slim.config().num_hidden_layers == 4);
  CHECK(slim.config().pruned_heads == std::map<int, std::vector<int>>{{1, {3}}, {3, {1, 3, 5, 7, 9, 11}}});
  CHECK(slim.config().intermediate_sizes == std::vector<int>{1536, 1536, 700, 1229});
  // Layer 3 of the export is layer 5 of the model: its LayerNorm moved with it.
  CHECK(max_abs_diff(slim.parameters().at("encoder.layer.3.output.LayerNorm.weight"),
                     model.parameters().at("encoder.layer.5.output.LayerNorm.weight")) == 0);
  CHECK(max_abs_diff(slim.forward(in).logits, masked) <= 1e-5);
  // Parameters and FLOPs by hand: two whole layers (12 heads, 1536 neurons and 6·D of biases and LayerNorms
  // each), 7 heads and 836 + 307 neurons of kept layers.
  const long D = c.hidden_size;
  const long layer_params = 12 * hp::eval::head_parameters(c) + 1536 * hp::eval::neuron_parameters(c) + 6 * D;
  CHECK(hp::eval::parameter_count(slim.config()) ==
        hp::eval::parameter_count(c) - 2 * layer_params - 7 * hp::eval::head_parameters(c) -
            (836 + 307) * hp::eval::neuron_parameters(c));
  CHECK(hp::eval::forward_flops(slim.config(), 1, 40) ==
        Approx(hp::eval::forward_flops(c, 1, 40) - (2 * 12 + 7) * hp::eval::head_flops(c, 40) -
               (2 * 1536 + 836 + 307) * hp::eval::neuron_flops(c, 40)));

  const auto dir = hp::test::scratch_dir("hp_slim_layers");
  std::filesystem::remove_all(dir);
  hp::core::save_bert(slim, dir.string(), hp::test::kMiniLM);
  CHECK(hp::core::read_bert_config((dir / "config.json").string()).num_hidden_layers == 4);
  CHECK(max_abs_diff(hp::core::load_bert(dir.string()).forward(in).logits, masked) <= 1e-5);
  const auto dense = hp::prune::dense_model(slim);
  CHECK(dense.config().num_hidden_layers == 4);  // removed layers stay removed
  CHECK(dense.parameters().at("encoder.layer.3.intermediate.dense.weight").sizes() ==
        model.parameters().at("encoder.layer.5.intermediate.dense.weight").sizes());
  CHECK(max_abs_diff(dense.forward(in).logits, masked) <= 1e-5);
  const auto dense_dir = hp::test::scratch_dir("hp_slim_layers_dense");
  std::filesystem::remove_all(dense_dir);
  hp::core::save_bert(dense, dense_dir.string(), hp::test::kMiniLM);
  return LayersExport{in, masked, dir, dense_dir};
}

}  // namespace

TEST_CASE("removed layers: masked (layer mask 0) = slimmed and renumbered = saved = HF 4 = dense = ONNX",
          "[prune][slim][layers][minilm]") {
  const auto e = layers_export();
  if (!e) return;
  const std::string py = HP_REF_PYTHON;
  if (!std::filesystem::exists(py)) return hp::test::skip("the Hugging Face check: no Python reference at " + py);
  CHECK(hp::test::hf_check(py, e->dir, e->in, e->masked, "--remote-code") == 0);
  CHECK(hp::test::hf_check(py, e->dense_dir, e->in, e->masked) == 0);  // transformers 4's own BERT, 4 layers
  hp::test::onnx_check_or_skip(hp::core::load_bert(e->dir.string()), e->dir);
}

// The optional transformers 5 venv decides this one: hidden ([.hf5]), run by the CTest test
// prune.transformers5_loads_slimmed, so that its skip never marks prune.slim_test as skipped.
TEST_CASE("removed layers: transformers 5 loads the slimmed export (remote code) and the dense one (optional venv)",
          "[prune][slim][layers][minilm][.hf5]") {
  const std::string py5 = hp::test::transformers5_or_skip();
  if (py5.empty()) return;
  const auto e = layers_export();
  if (!e) return;
  CHECK(hp::test::hf_check(py5, e->dir, e->in, e->masked, "--remote-code") == 0);
  CHECK(hp::test::hf_check(py5, e->dense_dir, e->in, e->masked) == 0);
}

TEST_CASE("a layer-only removal exports a plain BERT: no modeling file, transformers' own class loads it",
          "[prune][slim][layers]") {
  auto g = hp::core::read_hdf5(kTinyBertH5);
  auto model = hp::core::load_bert(kTinyBert);
  torch::NoGradGuard no_grad;
  const auto in = golden_input(g);
  auto masked_in = in;
  masked_in.layer_mask = torch::tensor({0.0f, 1.0f});
  const auto masked = model.forward(masked_in).logits;
  const auto slim = hp::prune::slim_model(model, {{true, true, true, true}, {true, true, true, true}}, {}, {false, true});
  CHECK(!slim.config().slimmed());
  CHECK(max_abs_diff(slim.parameters().at("encoder.layer.0.attention.self.query.weight"),
                     model.parameters().at("encoder.layer.1.attention.self.query.weight")) == 0);
  CHECK(max_abs_diff(slim.forward(in).logits, masked) <= 1e-5);
  const auto dir = hp::test::scratch_dir("hp_slim_layer_only");
  std::filesystem::remove_all(dir);
  hp::core::save_bert(slim, dir.string(), kTinyBert);
  CHECK(!std::filesystem::exists(dir / "modeling_headprune.py"));
  const std::string py = HP_REF_PYTHON;
  if (!std::filesystem::exists(py)) return hp::test::skip("the Hugging Face check: no Python reference at " + py);
  CHECK(hp::test::hf_check(py, dir, in, masked) == 0);
}
