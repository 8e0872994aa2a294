// The inference GEMM (oneDNN's sgemm, or ATen's addmm_ when switched off) against torch::linear.
#include <catch2/catch.hpp>

#include "core/kernels/gemm.h"

#include <cmath>
#include <torch/utils.h>

namespace {

double max_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

}  // namespace

TEST_CASE("inference linears equal torch::linear with either GEMM backend", "[core][gemm]") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(11);
  const auto x = torch::randn({3, 17, 40}), w = torch::randn({24, 40}), b = torch::randn({24});
  const auto residual = torch::randn({3, 17, 24});
  const auto expect = torch::linear(x, w, b);
  INFO("backend " << hp::core::gemm_backend());
  for (bool onednn : {true, false}) {
    hp::core::set_onednn_gemm_enabled(onednn);
    CHECK(max_diff(hp::core::linear_no_grad(x, w, b), expect) < 1e-5);
    // A strided row view (the [CLS] rows only) and accumulation into existing values.
    const auto cls = x.narrow(1, 0, 1).reshape({3, 40});
    REQUIRE(cls.stride(0) == 17 * 40);
    auto out = residual.select(1, 0).clone();
    hp::core::accumulate_linear(out, cls, w);
    CHECK(max_diff(out, residual.select(1, 0) + torch::linear(cls, w)) < 1e-5);
    // A transposed (non-contiguous) weight is accepted too.
    auto wt = w.t().contiguous().t();
    CHECK(max_diff(hp::core::linear_no_grad(x, wt, b), expect) < 1e-5);
    // An expanded (row stride 0) input takes the ATen path instead of failing in oneDNN.
    auto one_row = x[0][0].expand({5, 40});
    CHECK(max_diff(hp::core::linear_no_grad(one_row, w, b), torch::linear(one_row, w, b)) < 1e-5);
    // matmul_nt overwrites: whatever the output held before (here NaN) must not leak into it.
    auto fresh = torch::full({51, 24}, std::nanf(""));
    hp::core::matmul_nt(fresh, x.view({51, 40}), w);
    CHECK(max_diff(fresh, torch::linear(x.view({51, 40}), w)) < 1e-5);
    // Deterministic: the same call gives the same bits.
    CHECK(torch::equal(hp::core::linear_no_grad(x, w, b), hp::core::linear_no_grad(x, w, b)));
  }
  hp::core::set_onednn_gemm_enabled(true);
  CHECK_THROWS_WITH(
      [&] {
        auto bad = torch::zeros({2, 5});
        hp::core::accumulate_linear(bad, torch::zeros({2, 4}), torch::zeros({5, 3}));
      }(),
      Catch::Contains("accumulate_linear: shapes"));
}
