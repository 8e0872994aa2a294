// HeadGates: shapes, the penalty at init against the hand-computed closed form, top_n against an
// explicit ranking, and the bad-config catalogue (ConfigError naming the key).
#include "gates/head_gates.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>
#include <torch/utils.h>

#include "core/base/errors.h"

using Catch::Matchers::Contains;

namespace {

hp::core::GateConfig base_cfg() {
  hp::core::GateConfig c;
  c.enabled = true;
  return c;
}

int count(const hp::core::HeadSet& keep) {
  int n = 0;
  for (const auto& row : keep)
    for (bool k : row) n += k;
  return n;
}

}  // namespace

TEST_CASE("HeadGates: log α, shapes and sampling", "[gates]") {
  auto cfg = base_cfg();
  hp::gates::HeadGates gates(cfg, 2, 4);
  const auto& la = gates.log_alpha();
  CHECK(la.sizes() == torch::IntArrayRef({2, 4}));
  CHECK(la.requires_grad());
  CHECK(la.is_leaf());
  CHECK(torch::allclose(la.detach(), torch::full({2, 4}, cfg.log_alpha_init)));

  CHECK(gates.sample(/*batch=*/16).sizes() == torch::IntArrayRef({2, 4}));  // per_example off
  CHECK(gates.deterministic().sizes() == torch::IntArrayRef({2, 4}));

  torch::manual_seed(7);
  const auto a = gates.sample(16);
  torch::manual_seed(7);
  const auto b = gates.sample(16);
  CHECK(torch::equal(a, b));  // the global seed controls the draws

  cfg.per_example = true;
  hp::gates::HeadGates per(cfg, 2, 4);
  const auto g = per.sample(5);
  CHECK(g.sizes() == torch::IntArrayRef({5, 2, 4}));
  CHECK(per.sample(0).sizes() == torch::IntArrayRef({2, 4}));
  CHECK(g.min().item<float>() >= 0.0f);
  CHECK(g.max().item<float>() <= 1.0f);
  g.sum().backward();  // sampled gates are differentiable w.r.t. log α
  REQUIRE(per.log_alpha().grad().defined());
}

TEST_CASE("HeadGates: expected_open and l0_penalty at init", "[gates]") {
  auto cfg = base_cfg();  // β = 0.33, γ = -0.1, ζ = 1.1, log α = 2
  cfg.lambda = 0.05;
  hp::gates::HeadGates gates(cfg, 3, 4);
  // P(open) = σ(2 + 0.33 ln 11) = 0.94220 per head (header comment), 12 heads.
  const double p = 1.0 / (1.0 + std::exp(-(2.0 + 0.33 * std::log(11.0))));
  CHECK(p == Approx(0.94220).margin(1e-5));
  constexpr double kF32Tol = 1e-5;  // a float32 sum of 12 values near 1
  CHECK(gates.expected_open().item<double>() == Approx(12 * p).margin(kF32Tol));
  CHECK(gates.l0_penalty().item<double>() == Approx(0.05 * 12 * p).margin(kF32Tol));
  // Eq. 13 at log α = 2: σ(2)·1.2 − 0.1 = 0.95696.
  CHECK(gates.deterministic()[0][0].item<double>() == Approx(0.95696).margin(1e-5));
}

TEST_CASE("HeadGates::top_n: exactly n heads, the largest log α", "[gates]") {
  hp::gates::HeadGates gates(base_cfg(), 2, 4);
  const std::vector<float> vals = {0.3f, -1.0f, 2.5f, 0.9f, 1.7f, -0.2f, 0.0f, 3.1f};
  {
    torch::NoGradGuard no_grad;
    gates.log_alpha().copy_(torch::tensor(vals).reshape({2, 4}));
  }
  // Ranking by hand: 3.1 (1,3), 2.5 (0,2), 1.7 (1,0), 0.9 (0,3), 0.3 (0,0), 0.0 (1,2), -0.2 (1,1),
  // -1.0 (0,1).
  const std::vector<std::pair<int, int>> ranked = {{1, 3}, {0, 2}, {1, 0}, {0, 3}, {0, 0}, {1, 2}, {1, 1}, {0, 1}};
  for (int n : {0, 1, 3, 5, 8}) {
    CAPTURE(n);
    const auto keep = gates.top_n(n);
    REQUIRE(keep.size() == 2);
    REQUIRE(keep[0].size() == 4);
    CHECK(count(keep) == n);
    for (int i = 0; i < 8; ++i) CHECK(keep[ranked[i].first][ranked[i].second] == (i < n));
  }
  CHECK_THROWS_AS(gates.top_n(-1), hp::ConfigError);
  CHECK_THROWS_WITH(gates.top_n(9), Contains("model has 8 heads"));
}

TEST_CASE("HeadGates::top_n: ties go to the lower layer, then the lower head", "[gates]") {
  hp::gates::HeadGates gates(base_cfg(), 2, 4);  // all log α equal
  auto keep = gates.top_n(3);
  CHECK(keep[0] == std::vector<bool>{true, true, true, false});
  CHECK(keep[1] == std::vector<bool>{false, false, false, false});
  {
    torch::NoGradGuard no_grad;
    gates.log_alpha().copy_(torch::tensor({0.f, 0.f, 0.f, 1.f, 1.f, 0.f, 1.f, 2.f}).reshape({2, 4}));
  }
  keep = gates.top_n(3);  // 2.0 (1,3), then the tie at 1.0: (0,3) and (1,0) before (1,2)
  CHECK(keep[0] == std::vector<bool>{false, false, false, true});
  CHECK(keep[1] == std::vector<bool>{true, false, false, true});
}

TEST_CASE("HeadGates: bad config values name the key", "[gates]") {
  struct Bad {
    void (*edit)(hp::core::GateConfig&);
    const char* key;
  };
  const std::vector<Bad> bad = {
      {[](hp::core::GateConfig& c) { c.beta = 2.0; }, "gates.beta = 2, must be in (0, 1]"},
      {[](hp::core::GateConfig& c) { c.beta = 0.0; }, "gates.beta"},
      {[](hp::core::GateConfig& c) { c.gamma = 0.1; }, "gates.gamma"},
      {[](hp::core::GateConfig& c) { c.zeta = 0.9; }, "gates.zeta"},
      {[](hp::core::GateConfig& c) { c.lambda = -1.0; }, "gates.lambda"},
      {[](hp::core::GateConfig& c) { c.lr = 0.0; }, "gates.lr"},
      {[](hp::core::GateConfig& c) { c.log_alpha_init = std::nan(""); }, "gates.log_alpha_init"},
      {[](hp::core::GateConfig& c) { c.target_heads = 9; }, "gates.target_heads = 9, model has 8 heads"},
      {[](hp::core::GateConfig& c) { c.target_heads = -1; }, "gates.target_heads"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.key);
    auto cfg = base_cfg();
    b.edit(cfg);
    CHECK_THROWS_AS(hp::gates::HeadGates(cfg, 2, 4), hp::ConfigError);
    CHECK_THROWS_WITH(hp::gates::HeadGates(cfg, 2, 4), Contains(b.key));
  }
  auto ok = base_cfg();
  ok.target_heads = 8;
  CHECK_NOTHROW(hp::gates::HeadGates(ok, 2, 4));
}
