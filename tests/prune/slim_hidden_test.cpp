// Removing hidden channels (CoFi's hidden dimension, issue #42): the hidden mask against the slimmed model, the
// export against transformers 4 and 5 (remote code) and ONNX Runtime, and the counts by hand.
#include <catch2/catch.hpp>

#include <torch/types.h>
#include <torch/utils.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/process.h"
#include "core/io/checkpoint.h"
#include "core/model/head_mask.h"
#include "eval/evaluator.h"
#include "eval/flops.h"
#include "eval/latency.h"
#include "fixtures.h"
#include "hf_check.h"
#include "prune/export/onnx.h"
#include "prune/export/slim.h"
#include "skip.h"

namespace {

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

// The mask of the MiniLM case: layers 1 and 4 removed, heads 3 of layer 2 and the odd heads of layer 5, every fifth
// neuron of layer 5, and hidden channels 0-99 and every third one after them (384 → 189).
hp::core::StructureMask minilm_mask(const hp::core::BertConfig& c) {
  std::string spec = "layers:1,4;2:3;5:1,3,5,7,9,11;hidden:0-99";
  for (int ch = 100; ch < c.hidden_size; ch += 3) spec += "," + std::to_string(ch);
  auto m = hp::core::parse_mask(spec, c.num_hidden_layers, c.num_attention_heads, c.intermediate_size, "test",
                                c.hidden_size);
  for (int i = 0; i < c.intermediate_size; ++i) m.neurons[5][i] = i % 5 != 2;
  return m;
}

// Parameters of a slimmed BERT counted from its sizes alone (not through the key table): embeddings, each layer's
// projections, biases and LayerNorms, the pooler and the classifier.
long parameters_by_hand(const hp::core::BertConfig& c) {
  const long D = c.hidden_size, Dh = c.head_dim(), P = c.classifier_width();
  long n = (static_cast<long>(c.vocab_size) + c.max_position_embeddings + c.type_vocab_size) * D + 2 * D;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const long h = c.heads_in_layer(l), i = c.ffn_width(l);
    n += h * (3 * (D * Dh + Dh) + Dh * D) + D + 2 * D;  // Q, K, V and output columns; output bias; LayerNorm
    n += i * (D + 1) + i * D + D + 2 * D;  // FFN in (with bias), out; out bias; LayerNorm
  }
  return n + D * P + P + P * c.num_labels + c.num_labels;
}

}  // namespace

namespace {

// The hidden-channel case on MiniLM, up to its saved export: the folder and the masked model's logits it must give
// on `in`. Empty (the test skipped) without MiniLM.
struct HiddenExport {
  hp::core::EncoderInput in;
  torch::Tensor masked;
  std::filesystem::path dir;
};

std::optional<HiddenExport> hidden_export() {
  if (!std::filesystem::exists(hp::test::kMiniLM + "/config.json")) {
    hp::test::skip("MiniLM is absent (" + hp::test::kMiniLM + "); run scripts/setup.sh");
    return std::nullopt;
  }
  hp::core::LoadOptions lo;
  lo.num_labels = 2;
  const auto model = hp::core::load_bert(hp::test::kMiniLM, lo);
  auto in = hp::eval::synthetic_input(model.config(), 3, 40, 7);
  in.attention_mask[1].slice(0, 30).fill_(0);
  const auto& c = model.config();
  torch::NoGradGuard no_grad;
  const auto m = minilm_mask(c);
  REQUIRE(hp::core::count_kept({m.hidden}) == 189);
  auto masked_in = in;
  masked_in.head_mask = hp::eval::head_mask_tensor(m.heads);
  masked_in.neuron_mask = hp::eval::neuron_mask_tensor(m.neurons);
  masked_in.layer_mask = hp::eval::layer_mask_tensor(m.layers);
  masked_in.hidden_mask = hp::eval::hidden_mask_tensor(m.hidden);
  const auto masked = model.forward(masked_in).logits;
  auto whole = masked_in;
  whole.hidden_mask = torch::Tensor();
  CHECK(max_abs_diff(model.forward(whole).logits, masked) > 1e-3);  // the hidden mask matters
  // An all-ones hidden mask that is differentiated takes the masked LayerNorm path: the plain model's logits.
  auto ones = whole;
  ones.hidden_mask = torch::ones({c.hidden_size}).requires_grad_(true);
  {
    torch::AutoGradMode grad_on(true);
    CHECK(max_abs_diff(model.forward(ones).logits, model.forward(whole).logits) <= 1e-5);
    // At 0/1 values with a gradient: the same logits, and the open channels get a gradient.
    auto soft_in = masked_in;
    soft_in.hidden_mask = masked_in.hidden_mask.clone().requires_grad_(true);
    const auto soft = model.forward(soft_in).logits;
    CHECK(max_abs_diff(soft, masked) <= 1e-5);
    soft.sum().backward();
    CHECK(soft_in.hidden_mask.grad().abs().sum().item<double>() > 0);
  }

  const auto slim = hp::prune::slim_model(model, m);
  const auto& s = slim.config();
  CHECK(s.hidden_size == 189);
  CHECK(s.head_dim() == c.head_dim());
  CHECK(s.classifier_width() == c.hidden_size);
  CHECK(s.num_hidden_layers == 4);
  CHECK(slim.parameters().at("embeddings.word_embeddings.weight").size(1) == 189);
  CHECK(slim.parameters().at("encoder.layer.3.output.LayerNorm.weight").size(0) == 189);
  CHECK(slim.parameters().at("pooler.dense.weight").sizes().vec() == std::vector<int64_t>{c.hidden_size, 189});
  // Channel 100 is removed, so kept channel 0 of the export is channel 101 of the model (in layer 5, now 3).
  CHECK(slim.parameters().at("encoder.layer.3.output.LayerNorm.weight")[0].item<float>() ==
        model.parameters().at("encoder.layer.5.output.LayerNorm.weight")[101].item<float>());
  CHECK(max_abs_diff(slim.forward(in).logits, masked) <= 1e-5);
  CHECK(hp::eval::parameter_count(s) == parameters_by_hand(s));
  // FLOPs by hand at 40 tokens, and the budget's cost of the mask (UnitCosts::at_hidden) = the export's encoder.
  const double S = 40, D = 189, Dh = c.head_dim(), P = c.hidden_size;
  double flops = 2 * D * P + 2 * P * 2;
  for (int l = 0; l < s.num_hidden_layers; ++l)
    flops += s.heads_in_layer(l) * (2 * S * D * Dh * 4 + 4 * S * S * Dh) + s.ffn_width(l) * 4 * S * D;
  CHECK(hp::eval::forward_flops(s, 1, 40) == Approx(flops).epsilon(1e-12));
  CHECK(hp::core::structure_cost(m, hp::eval::unit_costs(c, false, 40)) ==
        Approx(hp::eval::encoder_flops(s, 40)).epsilon(1e-12));
  CHECK(hp::core::structure_cost(m, hp::eval::unit_costs(c, true, 40)) ==
        Approx(s.total_heads() * (3 * (D * Dh + Dh) + Dh * D) + s.total_neurons() * (2 * D + 1)).epsilon(1e-12));
  REQUIRE_THROWS_WITH(hp::prune::dense_model(slim), Catch::Contains("cannot hold a model whose hidden channels"));

  const auto dir = hp::test::scratch_dir("hp_slim_hidden");
  std::filesystem::remove_all(dir);
  hp::core::save_bert(slim, dir.string(), hp::test::kMiniLM);
  const auto config = nlohmann::json::parse(hp::core::read_file((dir / "config.json").string()));
  CHECK(config["hidden_size"] == 189);
  CHECK(config["head_dim"] == c.head_dim());
  CHECK(config["classifier_hidden_size"] == c.hidden_size);
  CHECK(config.contains("auto_map"));
  CHECK(max_abs_diff(hp::core::load_bert(dir.string()).forward(in).logits, masked) <= 1e-5);
  return HiddenExport{in, masked, dir};
}

}  // namespace

TEST_CASE("removed hidden channels: masked = slimmed = saved = HF 4 (remote code) = ONNX; counts by hand",
          "[prune][slim][hidden][minilm]") {
  const auto e = hidden_export();
  if (!e) return;
  const std::string py = HP_REF_PYTHON;
  if (!std::filesystem::exists(py)) return hp::test::skip("the Hugging Face check: no Python reference at " + py);
  CHECK(hp::test::hf_check(py, e->dir, e->in, e->masked, "--remote-code") == 0);
  CHECK(hp::test::hf_check(py, e->dir, e->in, e->masked) != 0);  // transformers' own BERT cannot build it
  hp::test::onnx_check_or_skip(hp::core::load_bert(e->dir.string()), e->dir);
}

// The optional transformers 5 venv decides this one: hidden ([.hf5]), run by the CTest test
// prune.transformers5_loads_slimmed, so that its skip never marks prune.slim_hidden_test as skipped.
TEST_CASE("removed hidden channels: transformers 5 loads the export through its modeling file (optional venv)",
          "[prune][slim][hidden][minilm][.hf5]") {
  const std::string py5 = hp::test::transformers5_or_skip();
  if (py5.empty()) return;
  const auto e = hidden_export();
  if (!e) return;
  CHECK(hp::test::hf_check(py5, e->dir, e->in, e->masked, "--remote-code") == 0);
}

TEST_CASE("hidden channels: the mask spec's group, its refusals, and the budget's cost", "[core][hidden]") {
  const auto m = hp::core::parse_mask("hidden:0-3,9;1:2", 2, 4, 10, "--mask", 12);
  CHECK(m.hidden == std::vector<bool>{false, false, false, false, true, true, true, true, true, false, true, true});
  CHECK(hp::core::format_mask(m) == "1:2;hidden:0-3,9");
  CHECK(hp::core::parse_mask(hp::core::format_mask(m), 2, 4, 10, "--mask", 12).hidden == m.hidden);
  CHECK(hp::core::parse_mask("1:2", 2, 4, 10, "--mask", 12).hidden.empty());
  REQUIRE_THROWS_WITH(hp::core::parse_mask("hidden:12", 2, 4, 10, "--mask", 12),
                      Catch::Contains("hidden channel 12 is out of range"));
  REQUIRE_THROWS_WITH(hp::core::parse_mask("hidden:0-11", 2, 4, 10, "--mask", 12),
                      Catch::Contains("removes all 12 hidden channels; keep at least one"));
  REQUIRE_THROWS_WITH(hp::core::parse_mask("hidden:1", 2, 4, 10), Catch::Contains("removes hidden channels"));
  REQUIRE_THROWS_WITH(hp::core::parse_head_mask("hidden:1", 2, 4), Catch::Contains("head groups only"));
  // 7 of 12 channels kept: a head costs 10 − 6·(5/12) = 7.5, a neuron 3 − 3·(5/12) = 1.75; 7 heads, 20 neurons.
  const hp::core::UnitCosts costs{10, 3, 6, 3};
  CHECK(hp::core::structure_cost(m, costs) == Approx(7 * 7.5 + 20 * 1.75));
}
