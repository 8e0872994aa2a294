// Bert::attention_grads (the hand-written backward to the attention probabilities) against autograd
// through Bert::forward: the same logits, maps and ∂loss/∂A in every layer, with padding, a 0-head layer,
// narrowed and 0-neuron FFN blocks, the tanh GELU and a regression head; and Bert::attention_grads_autograd, which
// a model off the CPU runs in its place, the same against the same reference.
#include <catch2/catch.hpp>

#include <string>
#include <torch/utils.h>
#include <torch/autograd.h>

#include "core/model/bert.h"
#include "core/io/checkpoint.h"
#include "fixtures.h"

namespace {

using hp::test::kTinyBert;
using hp::test::kTinyBertL4;
using hp::test::kTinyBertReg;

double max_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

// Token ids of 5 examples of length 11, example e padded after 11 - 2e tokens.
hp::core::EncoderInput padded_input(int vocab) {
  torch::manual_seed(3);
  hp::core::EncoderInput in;
  const int64_t B = 5, S = 11;
  in.input_ids = torch::randint(1, vocab, {B, S}, torch::kLong);
  in.token_type_ids = torch::zeros({B, S}, torch::kLong);
  in.token_type_ids.narrow(1, 6, 5).fill_(1);
  in.attention_mask = torch::ones({B, S}, torch::kLong);
  for (int64_t e = 1; e < B; ++e) {
    in.attention_mask[e].narrow(0, S - 2 * e, 2 * e).zero_();
    in.input_ids[e].narrow(0, S - 2 * e, 2 * e).zero_();
  }
  return in;
}

// Sum over examples of cross-entropy (or squared error for one output) against fixed targets.
torch::Tensor loss_of(const torch::Tensor& logits) {
  if (logits.size(1) == 1) return (logits.squeeze(1) - torch::linspace(0, 5, logits.size(0))).pow(2).sum();
  const auto labels = torch::arange(logits.size(0), torch::kLong) % logits.size(1);
  return torch::nll_loss(torch::log_softmax(logits, 1), labels, {}, at::Reduction::Sum);
}

void check_grads(const hp::core::Bert& model, const hp::core::Bert::AttentionGrads& got,
                 const hp::core::EncoderOutput& ref, const std::vector<torch::Tensor>& maps,
                 const std::vector<torch::Tensor>& grads, double tol);

// `tol`: relative to each layer's largest gradient (float32 rounding of two different summation orders,
// which the BLAS picks per CPU: 1.005e-5 was seen on an AMD EPYC, so 1e-5 failed there; a wrong gradient is
// off by far more than 5e-5).
void check_against_autograd(const hp::core::Bert& model, double tol = 5e-5) {
  const auto in = padded_input(model.config().vocab_size);
  // Reference: autograd from a differentiable embedding output through every layer.
  hp::core::EncoderInput ref_in = in;
  {
    torch::NoGradGuard no_grad;
    ref_in.start_hidden = model.embed(in);
  }
  ref_in.start_hidden.requires_grad_(true);
  ref_in.want_attention = true;
  const auto ref = model.forward(ref_in);
  std::vector<torch::Tensor> maps;  // the layers that have heads (a 0-head layer's empty map is not in the graph)
  for (const auto& a : ref.attentions)
    if (a.requires_grad()) maps.push_back(a);
  const auto grads = torch::autograd::grad({loss_of(ref.logits)}, maps, {}, false, false, true);

  const auto dloss = [](const torch::Tensor& logits) {
    auto leaf = logits.detach().requires_grad_(true);
    return torch::autograd::grad({loss_of(leaf)}, {leaf})[0];
  };
  // The hand-written backward, and the autograd one a model off the CPU runs (analyze --device cuda).
  for (bool by_autograd : {false, true}) {
    INFO((by_autograd ? "attention_grads_autograd" : "attention_grads"));
    check_grads(model, by_autograd ? model.attention_grads_autograd(in, dloss) : model.attention_grads(in, dloss), ref,
                maps, grads, tol);
  }
}

void check_grads(const hp::core::Bert& model, const hp::core::Bert::AttentionGrads& got,
                 const hp::core::EncoderOutput& ref, const std::vector<torch::Tensor>& maps,
                 const std::vector<torch::Tensor>& grads, double tol) {
  CHECK(max_diff(got.out.logits, ref.logits.detach()) < 1e-5);
  const int L = model.config().num_hidden_layers;
  REQUIRE(got.grads.size() == static_cast<size_t>(L));
  REQUIRE(got.out.attentions.size() == static_cast<size_t>(L));
  for (int l = 0; l < L; ++l) {
    INFO("layer " << l);
    REQUIRE(got.out.attentions[l].sizes() == ref.attentions[l].sizes());
    REQUIRE(got.grads[l].sizes() == ref.attentions[l].sizes());
    CHECK(!got.out.attentions[l].requires_grad());
    if (got.grads[l].numel() == 0) continue;
    CHECK(max_diff(got.out.attentions[l], ref.attentions[l].detach()) < 1e-5);  // float32 rounding of other GEMMs
    torch::Tensor want;
    for (size_t i = 0; i < maps.size(); ++i)
      if (maps[i].is_same(ref.attentions[l])) want = grads[i];
    REQUIRE(want.defined());
    const double scale = want.abs().max().item<double>();
    CHECK(scale > 0);  // the loss reaches every layer's maps
    CHECK(max_diff(got.grads[l], want) <= tol * scale + 1e-9);
  }
  // The last layer's gradient lives in its [CLS] row only.
  const auto& top = got.grads[L - 1];
  if (top.numel() > 0) CHECK(top.narrow(2, 1, top.size(2) - 1).abs().max().item<double>() == 0);
}

// `model` with every head of layer `l` removed (shapes narrowed as a slimmed export has them).
hp::core::Bert without_layer_heads(const hp::core::Bert& model, int l) {
  auto cfg = model.config();
  auto params = model.parameters();
  const std::string pre = "encoder.layer." + std::to_string(l) + ".attention.";
  for (const char* m : {"self.query", "self.key", "self.value"}) {
    params[pre + m + ".weight"] = params[pre + m + ".weight"].narrow(0, 0, 0);
    params[pre + m + ".bias"] = params[pre + m + ".bias"].narrow(0, 0, 0);
  }
  params[pre + "output.dense.weight"] = params[pre + "output.dense.weight"].narrow(1, 0, 0);
  for (int h = 0; h < cfg.num_attention_heads; ++h) cfg.pruned_heads[l].push_back(h);
  return hp::core::Bert(cfg, params);
}

// `model` with layer `l`'s FFN narrowed to its first `width` neurons (0: the FFN block is its output bias).
hp::core::Bert with_ffn_width(const hp::core::Bert& model, int l, int width) {
  auto cfg = model.config();
  auto params = model.parameters();
  const std::string pre = "encoder.layer." + std::to_string(l) + ".";
  params[pre + "intermediate.dense.weight"] = params[pre + "intermediate.dense.weight"].narrow(0, 0, width);
  params[pre + "intermediate.dense.bias"] = params[pre + "intermediate.dense.bias"].narrow(0, 0, width);
  params[pre + "output.dense.weight"] = params[pre + "output.dense.weight"].narrow(1, 0, width);
  cfg.intermediate_sizes.assign(cfg.num_hidden_layers, cfg.intermediate_size);
  cfg.intermediate_sizes[l] = width;
  return hp::core::Bert(cfg, params);
}

}  // namespace

TEST_CASE("attention_grads equals autograd: 4 layers, padding", "[core][attention_grads]") {
  check_against_autograd(hp::core::load_bert(kTinyBertL4));
}

TEST_CASE("attention_grads equals autograd: a 0-head middle layer, a 0-head last layer", "[core][attention_grads]") {
  const auto model = hp::core::load_bert(kTinyBertL4);
  check_against_autograd(without_layer_heads(model, 1));
  check_against_autograd(without_layer_heads(model, 3));
}

TEST_CASE("attention_grads equals autograd: a narrowed FFN, a 0-neuron FFN in the middle and on top",
          "[core][attention_grads]") {
  const auto model = hp::core::load_bert(kTinyBertL4);
  check_against_autograd(with_ffn_width(model, 1, 5));
  check_against_autograd(with_ffn_width(model, 2, 0));
  // Without the top FFN, float32 rounding in layers 0 and 1 reaches 1.3e-5 of their largest gradient
  // (measured); a wrong gradient path (the FFN block's residual dropped) is off by far more.
  check_against_autograd(with_ffn_width(model, 3, 0), 5e-5);
}

TEST_CASE("attention_grads equals autograd: regression head, tanh GELU", "[core][attention_grads]") {
  auto reg = hp::core::load_bert(kTinyBertReg);
  check_against_autograd(reg);
  auto cfg = reg.config();
  cfg.hidden_act = "gelu_new";
  check_against_autograd(hp::core::Bert(cfg, reg.parameters()));
}

TEST_CASE("attention_grads refuses training mode and head masks", "[core][attention_grads]") {
  auto model = hp::core::load_bert(kTinyBert);
  auto in = padded_input(model.config().vocab_size);
  auto dloss = [](const torch::Tensor& logits) { return torch::ones_like(logits); };
  in.head_mask = torch::ones({2, 4});
  CHECK_THROWS(model.attention_grads(in, dloss));
  in.head_mask = torch::Tensor();
  model.set_training(true);
  CHECK_THROWS(model.attention_grads(in, dloss));
}
