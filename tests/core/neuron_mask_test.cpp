// EncoderInput::neuron_mask: a 0 removes an FFN neuron exactly, a per-example mask is that example's mask,
// and its gradient (Kwon et al. 2022's mask gradient) equals the identity that autograd gives for the FFN
// output weights: with the mask at 1, ∂L/∂m_i = Σ_d W2[d, i] · ∂L/∂W2[d, i] (W2's column i meets exactly the
// neuron's masked activation), an independent way to the same number.
#include <catch2/catch.hpp>
#include <torch/types.h>
#include <torch/utils.h>
#include <torch/autograd.h>

#include "core/io/checkpoint.h"
#include "core/io/tensor_io.h"
#include "fixtures.h"

namespace {

using hp::test::kTinyBert;
using hp::test::kTinyBertH5;

hp::core::EncoderInput golden_input() {
  auto g = hp::core::read_hdf5(kTinyBertH5);
  hp::core::EncoderInput in;
  in.input_ids = g.at("input_ids");
  in.token_type_ids = g.at("token_type_ids");
  in.attention_mask = g.at("attention_mask");
  return in;
}

torch::Tensor loss_of(const torch::Tensor& logits) {
  const auto labels = torch::arange(logits.size(0), torch::kLong) % logits.size(1);
  return torch::nll_loss(torch::log_softmax(logits, 1), labels, {}, at::Reduction::Sum);
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

}  // namespace

TEST_CASE("neuron mask: zeroing a neuron = zeroing its weights; per-example masks; shapes checked", "[core][neurons]") {
  auto model = hp::core::load_bert(kTinyBert);
  torch::NoGradGuard no_grad;
  const auto in = golden_input();
  auto mask = torch::ones({2, 37});
  mask[0][5] = 0, mask[1][0] = 0, mask[1][36] = 0;
  auto masked_in = in;
  masked_in.neuron_mask = mask;
  const auto masked = model.forward(masked_in).logits;
  // The same neurons removed by zeroing their first-matrix rows and biases (GELU(0) = 0).
  auto params = model.parameters();
  for (auto [l, i] : {std::pair{0, 5}, {1, 0}, {1, 36}}) {
    const std::string pre = "encoder.layer." + std::to_string(l) + ".intermediate.dense.";
    params[pre + "weight"] = params[pre + "weight"].clone();
    params[pre + "weight"][i].zero_();
    params[pre + "bias"] = params[pre + "bias"].clone();
    params[pre + "bias"][i].zero_();
  }
  const hp::core::Bert zeroed(model.config(), params);
  CHECK(max_diff(masked, zeroed.forward(in).logits) <= 1e-5);
  CHECK(max_diff(masked, model.forward(in).logits) > 1e-4);
  // A [B, L, I] mask: each example under its own mask.
  const long B = in.input_ids.size(0);
  auto per_example = torch::ones({B, 2, 37});
  per_example[0] = mask;
  masked_in.neuron_mask = per_example;
  const auto mixed = model.forward(masked_in).logits;
  CHECK(max_diff(mixed[0], masked[0]) <= 1e-5);
  CHECK(max_diff(mixed.narrow(0, 1, B - 1), model.forward(in).logits.narrow(0, 1, B - 1)) <= 1e-5);
  masked_in.neuron_mask = torch::ones({2, 36});
  CHECK_THROWS_WITH(model.forward(masked_in), Catch::Contains("neuron_mask must be [2, 37]"));
}

TEST_CASE("neuron mask gradient equals the FFN output weights' gradient identity", "[core][neurons]") {
  auto model = hp::core::load_bert(kTinyBert);
  const auto in = golden_input();
  auto& params = model.mutable_parameters();
  std::vector<torch::Tensor> w2;
  for (int l = 0; l < 2; ++l) {
    auto& w = params.at("encoder.layer." + std::to_string(l) + ".output.dense.weight");
    w = w.detach().clone().requires_grad_(true);
    w2.push_back(w);
  }
  const hp::core::Bert graded(model.config(), params);  // Bert keeps references to the tensors it is given
  auto masked_in = in;
  masked_in.neuron_mask = torch::ones({2, 37}, torch::requires_grad());
  const auto loss = loss_of(graded.forward(masked_in).logits);
  const auto g = torch::autograd::grad({loss}, {masked_in.neuron_mask, w2[0], w2[1]});
  for (int l = 0; l < 2; ++l) {
    INFO("layer " << l);
    const auto want = (w2[l].detach() * g[1 + l]).sum(0);  // Σ_d W2[d, i] ∂L/∂W2[d, i]
    const double scale = want.abs().max().item<double>();
    CHECK(scale > 1e-6);
    CHECK(max_diff(g[0][l], want) <= 1e-4 * scale);
  }
}
