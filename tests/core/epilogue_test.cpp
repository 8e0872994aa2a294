// The fused GEMM epilogues (core/kernels/epilogue.h) against double-precision closed forms and ATen, at odd
// widths and row strides; and the whole inference forward with them on and off. Each kernel path this CPU
// has (AVX2, AVX-512: isa::vector_paths() above scalar) runs under isa::ScopedCap against the references
// and against the other paths, within float32 tolerances, never bit for bit (they sum 8 or 16 lanes, and
// GELU's 1/d is a division or rcp14 and a Newton step).
#include <catch2/catch.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/kernels/epilogue.h"
#include "core/kernels/isa.h"
#include "fixtures.h"

namespace {

namespace isa = hp::core::isa;
using hp::test::kTinyBert;

// Rows of width n inside rows of stride ld > n; the gap holds a sentinel the kernels must not touch.
struct Strided {
  torch::Tensor storage, view;
};
Strided strided_rows(const torch::Tensor& values, int64_t ld) {
  auto storage = torch::full({values.size(0), ld}, 12345.0f);
  storage.narrow(1, 0, values.size(1)).copy_(values);
  return {storage, storage.narrow(1, 0, values.size(1))};
}
bool gap_untouched(const Strided& s) {
  const auto n = s.view.size(1), ld = s.storage.size(1);
  return ld == n || s.storage.narrow(1, n, ld - n).eq(12345.0f).all().item<bool>();
}

// The paths with fused epilogues (AVX2, AVX-512) that this CPU has; a warning names each it lacks, so a
// run shows what it did not test. The scalar path has none (it keeps ATen's ops: the last test).
std::vector<isa::Level> kernel_paths() {
  std::vector<isa::Level> paths;
  for (isa::Level l : {isa::Level::kAvx2, isa::Level::kAvx512}) {
    if (isa::cpu_has(l)) paths.push_back(l);
    else WARN("this CPU has no " << isa::name(l) << ": its fused epilogues are not tested here");
  }
  return paths;
}

double max_abs(const torch::Tensor& t) { return t.abs().max().item<double>(); }

// Paths against each other: GELU within twice its bound to the closed form, LayerNorm likewise.
constexpr double kGeluPathTol = 4e-6, kLayerNormPathTol = 2e-5;

}  // namespace

TEST_CASE("bias + GELU pass equals the exact erf GELU, bias + ReLU equals max(0, .)", "[core][epilogue]") {
  const auto paths = kernel_paths();
  torch::manual_seed(5);
  for (int64_t n : {int64_t{1}, int64_t{8}, int64_t{16}, int64_t{37}, int64_t{3077}}) {
    // Wide range: the tails (|x| up to 12, where erf saturates and exp underflows), zeros and tiny values.
    auto y = torch::randn({7, n}) * 4;
    y[0].narrow(0, 0, std::min<int64_t>(n, 3))
        .copy_(torch::tensor({0.0f, -12.0f, 1e-30f}).narrow(0, 0, std::min<int64_t>(n, 3)));
    const auto bias = torch::randn({n});
    const auto x = (y + bias).to(torch::kFloat64);
    const auto expect = 0.5 * x * (1 + torch::erf(x / std::sqrt(2.0)));  // double precision
    std::vector<torch::Tensor> gelu;  // per path
    for (isa::Level path : paths) {
      isa::ScopedCap cap(path);
      INFO("width " << n << ", path " << isa::name(path));
      REQUIRE(hp::core::epilogue_kernels_available());
      auto s = strided_rows(y, n + 5);
      hp::core::bias_activation_rows(s.view.data_ptr<float>(), 7, n, n + 5, bias.data_ptr<float>(),
                                     hp::core::EpilogueActivation::kGeluErf);
      const auto err = (s.view.to(torch::kFloat64) - expect).abs();
      // A&S 7.1.26 is within 1.5e-7 of erf, so GELU within 0.75e-7·|x|, plus float rounding (and 1/d's).
      CHECK((err - 1e-7 * x.abs() - 2e-7 * expect.abs()).max().item<double>() <= 1e-7);
      CHECK(max_abs(s.view - torch::gelu(y + bias)) <= 2e-6);  // ATen's float GELU
      CHECK(gap_untouched(s));
      gelu.push_back(s.view);

      // One correctly rounded add and a max: exact on every path, so equal to ATen's bit for bit.
      auto r = strided_rows(y, n + 3);
      hp::core::bias_activation_rows(r.view.data_ptr<float>(), 7, n, n + 3, bias.data_ptr<float>(),
                                     hp::core::EpilogueActivation::kRelu);
      CHECK(torch::equal(r.view, torch::relu(y + bias)));
      CHECK(gap_untouched(r));
      auto b = strided_rows(y, n + 1);
      hp::core::bias_activation_rows(b.view.data_ptr<float>(), 7, n, n + 1, bias.data_ptr<float>(),
                                     hp::core::EpilogueActivation::kNone);
      CHECK(torch::equal(b.view, y + bias));
      CHECK(gap_untouched(b));
    }
    for (size_t i = 1; i < gelu.size(); ++i) CHECK(max_abs(gelu[i] - gelu[0]) <= kGeluPathTol);
  }
  // A NaN stays a NaN (a broken checkpoint must not turn into plausible numbers).
  for (isa::Level path : paths) {
    isa::ScopedCap cap(path);
    for (auto act : {hp::core::EpilogueActivation::kGeluErf, hp::core::EpilogueActivation::kRelu}) {
      INFO("path " << isa::name(path));
      auto y = torch::tensor({std::nanf(""), 1.0f, -1.0f});
      const auto bias = torch::zeros({3});
      hp::core::bias_activation_rows(y.data_ptr<float>(), 1, 3, 3, bias.data_ptr<float>(), act);
      CHECK(std::isnan(y[0].item<float>()));
      CHECK(!std::isnan(y[1].item<float>()));
    }
  }
}

TEST_CASE("bias + residual + LayerNorm pass equals LayerNorm of the sum", "[core][epilogue]") {
  const auto paths = kernel_paths();
  torch::manual_seed(6);
  for (int64_t n : {int64_t{1}, int64_t{8}, int64_t{16}, int64_t{37}, int64_t{768}}) {
    const int64_t rows = 9;
    // An offset and spread like real pre-LayerNorm activations, so centring matters.
    auto y = torch::randn({rows, n}) * 3 + 5;
    const auto residual = torch::randn({rows, n + 11}).narrow(1, 3, n);  // row stride n + 11
    const auto bias = torch::randn({n}), gamma = torch::randn({n}), beta = torch::randn({n});
    const float eps = 1e-12f;
    const auto sum = (y + bias + residual).to(torch::kFloat64);
    const auto expect = torch::layer_norm(sum, {n}, gamma.to(torch::kFloat64), beta.to(torch::kFloat64), eps);
    std::vector<torch::Tensor> out;  // per path
    for (isa::Level path : paths) {
      isa::ScopedCap cap(path);
      INFO("width " << n << ", path " << isa::name(path));
      auto s = strided_rows(y, n + 2);
      hp::core::bias_residual_layer_norm_rows(s.view.data_ptr<float>(), n + 2, residual.data_ptr<float>(),
                                              residual.stride(0), bias.data_ptr<float>(), gamma.data_ptr<float>(),
                                              beta.data_ptr<float>(), rows, n, eps);
      // float32 sums of ≤ 768 terms around 5 ± 3, normalised: ~1e-6 from the double closed form.
      CHECK(max_abs(s.view.to(torch::kFloat64) - expect) <= 1e-5);
      CHECK(gap_untouched(s));
      if (n == 1) CHECK(torch::equal(s.view, beta.expand({rows, 1})));  // one column: centred to exactly 0
      out.push_back(s.view);
    }
    for (size_t i = 1; i < out.size(); ++i) CHECK(max_abs(out[i] - out[0]) <= kLayerNormPathTol);
  }
}

TEST_CASE("fused epilogues do not depend on the thread count", "[core][epilogue]") {
  torch::manual_seed(7);
  const int64_t rows = 300, n = 768;
  const auto y = torch::randn({rows, n}), residual = torch::randn({rows, n});
  const auto bias = torch::randn({n}), gamma = torch::randn({n}), beta = torch::randn({n});
  const int threads = at::get_num_threads();
  for (isa::Level path : kernel_paths()) {  // each path against itself: one path's rows are bit-reproducible
    isa::ScopedCap cap(path);
    INFO("path " << isa::name(path));
    torch::Tensor out[2], act[2];
    for (int t : {0, 1}) {
      at::set_num_threads(t == 0 ? 1 : std::max(2, threads));
      out[t] = y.clone();
      hp::core::bias_residual_layer_norm_rows(out[t].data_ptr<float>(), n, residual.data_ptr<float>(), n,
                                              bias.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(),
                                              rows, n, 1e-12f);
      act[t] = y.clone();
      hp::core::bias_activation_rows(act[t].data_ptr<float>(), rows, n, n, bias.data_ptr<float>(),
                                     hp::core::EpilogueActivation::kGeluErf);
    }
    at::set_num_threads(threads);
    CHECK(torch::equal(out[0], out[1]));
    CHECK(torch::equal(act[0], act[1]));
  }
}

// The tiny model's forward on every float32 path, fused epilogues on and off, against the scalar path (ATen's
// ops and the BLAS attention loop): within 1e-5, the float32 rounding of a few layers of sums.
TEST_CASE("the inference forward is the same with the fused epilogues and with ATen's ops", "[core][epilogue]") {
  kernel_paths();  // warns of the kernel paths this CPU lacks
  torch::NoGradGuard no_grad;
  const auto tiny = hp::core::load_bert(kTinyBert);
  torch::manual_seed(8);
  hp::core::EncoderInput in;
  in.input_ids = torch::randint(5, tiny.config().vocab_size, {3, 11}, torch::kLong);
  in.token_type_ids = torch::zeros({3, 11}, torch::kLong);
  in.attention_mask = torch::ones({3, 11}, torch::kLong);
  in.attention_mask[2].narrow(0, 6, 5).zero_();
  in.want_hidden = true;
  for (const char* act : {"gelu", "relu"}) {
    auto cfg = tiny.config();
    cfg.hidden_act = act;
    const hp::core::Bert model(cfg, tiny.parameters());
    for (bool cls_only : {false, true}) {
      auto run = [&](isa::Level path, bool fused) {
        isa::ScopedCap cap(path);
        hp::core::set_epilogue_kernels_enabled(fused);
        auto sub = in;
        sub.cls_only = cls_only;
        sub.want_hidden = !cls_only;
        auto out = model.forward(sub);
        hp::core::set_epilogue_kernels_enabled(true);
        return out;
      };
      const auto aten = run(isa::Level::kScalar, false);
      CHECK(aten.logits.std().item<double>() > 1e-3);  // the outputs are not constant
      for (isa::Level path : isa::vector_paths()) {
        for (bool fused : {true, false}) {
          INFO("hidden_act " << act << ", cls_only " << cls_only << ", path " << isa::name(path) << ", fused "
                             << fused);
          const auto out = run(path, fused);
          CHECK(max_abs(out.logits - aten.logits) <= 1e-5);
          CHECK(max_abs(out.pooled - aten.pooled) <= 1e-5);
          REQUIRE(out.hidden_states.size() == aten.hidden_states.size());
          for (size_t l = 0; l < out.hidden_states.size(); ++l)
            CHECK(max_abs(out.hidden_states[l] - aten.hidden_states[l]) <= 1e-5);
        }
      }
    }
  }
}
