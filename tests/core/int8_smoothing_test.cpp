// Calibrated int8 (SmoothQuant, core/model/bert.h calibrate_int8): the smoothing factors against a hand
// computation, what calibration records against the float32 forward's own activations, and the model's
// packed int8 weights (codes and scales) against a hand quantisation of w · s. The int8 error tests of
// tests/core/lowp_gemm_test.cpp only check that calibration halves the error, which factors from another
// formula still do (#44: such a planted bug passed).
#include <catch2/catch.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include <cmath>

#include "core/io/checkpoint.h"
#include "core/model/bert.h"
#include "fixtures.h"

using hp::core::Precision;

TEST_CASE("calibrated int8: smoothing factors s_k = max|x_k|^0.5 / max_n |w_nk|^0.5, by hand", "[core][lowp][smoothing]") {
  // N = 3 outputs, K = 4 inputs (N != K: the max is over the output rows n, per input channel k).
  // Column maxima of |w|: 4, 1, 0.0625, 25; act_max 9, 16, 0.25, 100:
  // s = 3/2, 4/1, 0.5/0.25, 10/5 = 1.5, 4, 2, 2.
  const auto w = torch::tensor(std::vector<float>{4, -1, 0.0625f, 0,  //
                                                  -2, 0.5f, -0.03125f, 25,  //
                                                  1, 0, 0, -3})
                     .view({3, 4});
  const auto act_max = torch::tensor(std::vector<float>{9, 16, 0.25f, 100});
  const auto s = hp::core::smoothing_factors(w, act_max);
  REQUIRE(s.sizes() == torch::IntArrayRef{4});
  const std::vector<float> want = {1.5f, 4.0f, 2.0f, 2.0f};
  for (int k = 0; k < 4; ++k) CHECK(s[k].item<float>() == Approx(want[k]).epsilon(1e-6));
  // A linear with no output rows (a slimmed sublayer with no head or FFN neuron left): 1 for every input channel.
  const auto none = hp::core::smoothing_factors(torch::zeros({0, 4}), act_max);
  REQUIRE(none.sizes() == torch::IntArrayRef{4});
  CHECK(torch::equal(none, torch::ones({4})));
}

namespace {

// The tiny model with outlier channels, as in BERT (two hidden dimensions scaled up in every LayerNorm), and a
// batch of random ids without padding.
struct OutlierModel {
  hp::core::Bert model = hp::core::load_bert(hp::test::kTinyBert);
  hp::core::EncoderInput in;
  OutlierModel() {
    for (auto& [name, t] : model.mutable_parameters())
      if (name.find("LayerNorm.weight") != std::string::npos) {
        t[5].mul_(40.0);
        t[17].mul_(-25.0);
      }
    torch::manual_seed(4);
    in.input_ids = torch::randint(5, model.config().vocab_size, {3, 12});
    in.attention_mask = torch::ones({3, 12}, torch::kLong);
  }
};

// max over every token of |x| per channel: x [B, S, K] -> [K].
torch::Tensor channel_max(const torch::Tensor& x) { return x.reshape({-1, x.size(-1)}).abs().amax(0); }

}  // namespace

TEST_CASE("calibrated int8: the recorded maxima are the activations', the packed codes quantise w · s by hand",
          "[core][lowp][smoothing]") {
  torch::NoGradGuard no_grad;
  OutlierModel m;
  auto& model = m.model;
  auto probe = m.in;
  probe.want_hidden = true;
  probe.want_ffn = true;
  const auto fp32 = model.forward(probe);  // the inputs of each layer's qkv and FFN-in linears
  model.set_precision(Precision::kInt8);
  model.calibrate_int8([&] { model.forward(m.in); });
  const auto& recorded = model.int8_activation_max();
  const int L = model.config().num_hidden_layers;
  REQUIRE(recorded.size() == static_cast<size_t>(4 * L + 1));
  const auto& p = model.parameters();
  for (int l = 0; l < L; ++l) {
    const std::string pre = "encoder.layer." + std::to_string(l) + ".";
    struct Linear {
      int which;
      torch::Tensor weight, input;
    };
    const Linear linears[] = {
        {0,
         torch::cat({p.at(pre + "attention.self.query.weight"), p.at(pre + "attention.self.key.weight"),
                     p.at(pre + "attention.self.value.weight")}),
         fp32.hidden_states[l]},
        {2, p.at(pre + "intermediate.dense.weight"), fp32.ffn_inputs[l]}};
    for (const auto& lin : linears) {
      INFO("layer " << l << ", linear " << lin.which);
      const auto act = recorded.at(4 * l + lin.which);
      // Calibration records at float32 (the fused passes may sum in another order).
      CHECK(torch::allclose(act, channel_max(lin.input), 1e-5, 1e-6));
      // By hand, in double: s_k = sqrt(max|x_k|) / sqrt(max_n |w_nk|), then w · s quantised per output row.
      const auto w = lin.weight.to(torch::kDouble);
      const auto s = (act.to(torch::kDouble).sqrt() / w.abs().amax(0).sqrt()).to(torch::kFloat);
      const auto& pack = model.inference_pack(l, lin.which);
      REQUIRE(pack.precision() == Precision::kInt8);
      REQUIRE(pack.smoothed());
      const auto ws = lin.weight * s.unsqueeze(0);
      const auto scale = ws.abs().amax(1) / static_cast<float>(pack.weight_max());
      CHECK(torch::allclose(pack.scales(), scale, 1e-5, 0));
      const auto codes = torch::round(ws / scale.unsqueeze(1)).clamp(-pack.weight_max(), pack.weight_max());
      const auto diff = (pack.int8_weights().to(torch::kFloat) - codes).abs();
      CHECK(diff.max().item<float>() <= 1);  // a value on a rounding boundary may go either way
      CHECK(diff.gt(0).sum().item<long>() <= codes.numel() / 100);
    }
  }
}
