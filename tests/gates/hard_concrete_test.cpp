// Hard-Concrete math against closed forms: hand-computed points, Monte Carlo frequencies of g = 0,
// g = 1 and g > 0 from the logistic CDF, and autograd against σ' and central finite differences.
#include "gates/hard_concrete.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>
#include <torch/utils.h>

namespace {

using hp::gates::StretchLimits;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// s ~ σ((ℓ + log α)/β) with ℓ ~ Logistic(0, 1), so P(s ≤ c) = σ(β logit(c) − log α).
// g = 0 ⇔ s ≤ −γ/(ζ−γ), whose logit is log(−γ/ζ); g = 1 ⇔ s ≥ (1−γ)/(ζ−γ), logit log((1−γ)/(ζ−1)).
double p_closed(double log_alpha, double beta, StretchLimits lim) {
  return sigmoid(beta * std::log(-lim.gamma / lim.zeta) - log_alpha);
}
double p_one(double log_alpha, double beta, StretchLimits lim) {
  return sigmoid(log_alpha - beta * std::log((1.0 - lim.gamma) / (lim.zeta - 1.0)));
}

constexpr long kDraws = 200000;
// Binomial frequencies over kDraws draws: 5 standard errors (fails by chance with p < 1e-6 per
// check).
double mc_tol(double p) { return 5.0 * std::sqrt(p * (1.0 - p) / kDraws) + 1e-6; }

const auto kF64 = torch::TensorOptions().dtype(torch::kFloat64);

}  // namespace

TEST_CASE("hard_concrete_sample: hand-computed points", "[gates]") {
  const StretchLimits lim;  // γ = -0.1, ζ = 1.1
  // u = 0.5 → logistic 0; u = 0.75 → +ln 3; u = 0.25 → −ln 3.
  const auto u = torch::tensor({0.5, 0.75, 0.25, 0.5, 0.5}, kF64);
  const auto la = torch::tensor({0.0, 0.0, 0.0, 10.0, -10.0}, kF64);
  const auto g = hp::gates::hard_concrete_sample(la, /*beta=*/0.5, lim, u);
  // s = 0.5 → 0.5·1.2 − 0.1 = 0.5; s = σ(2 ln 3) = 0.9 → 0.98; s = 0.1 → 0.02; clipped to 1 and 0.
  const std::vector<double> want = {0.5, 0.98, 0.02, 1.0, 0.0};
  for (size_t i = 0; i < want.size(); ++i) CHECK(g[i].item<double>() == Approx(want[i]).margin(1e-12));
}

TEST_CASE("hard_concrete_mean: eq. 13 at hand-computed points", "[gates]") {
  const auto la = torch::tensor({0.0, std::log(3.0), -std::log(3.0), 10.0, -10.0}, kF64);
  const auto m = hp::gates::hard_concrete_mean(la, StretchLimits{});
  // σ = 0.5 → 0.5; σ = 0.75 → 0.8; σ = 0.25 → 0.2; clipped to 1 and 0.
  const std::vector<double> want = {0.5, 0.8, 0.2, 1.0, 0.0};
  for (size_t i = 0; i < want.size(); ++i) CHECK(m[i].item<double>() == Approx(want[i]).margin(1e-12));
}

TEST_CASE("l0_expected: hand-computed point", "[gates]") {
  // β = 1, log α = −ln 11: σ(−ln 11 − ln(0.1/1.1)) = σ(0) = 0.5.
  const auto p = hp::gates::l0_expected(torch::tensor({-std::log(11.0)}, kF64), 1.0, StretchLimits{});
  CHECK(p.item<double>() == Approx(0.5).margin(1e-12));
}

TEST_CASE("hard_concrete: Monte Carlo frequencies match the closed forms", "[gates]") {
  struct Case {
    double log_alpha, beta;
    StretchLimits lim;
  };
  const std::vector<Case> cases = {
      {-2.0, 0.33, {}},      {0.0, 0.33, {}}, {2.0, 0.33, {}},         {0.5, 2.0 / 3.0, {}},
      {-1.0, 2.0 / 3.0, {}}, {3.0, 0.5, {}},  {0.3, 1.0, {-0.2, 1.3}},
  };
  torch::manual_seed(1234);
  for (const auto& c : cases) {
    CAPTURE(c.log_alpha, c.beta, c.lim.gamma, c.lim.zeta);
    const auto la = torch::full({kDraws}, c.log_alpha, kF64);
    const auto g = hp::gates::hard_concrete_sample(la, c.beta, c.lim, hp::gates::hard_concrete_noise({kDraws}, kF64));
    REQUIRE(g.min().item<double>() >= 0.0);
    REQUIRE(g.max().item<double>() <= 1.0);
    const double f_zero = (g == 0.0).to(torch::kFloat64).mean().item<double>();
    const double f_one = (g == 1.0).to(torch::kFloat64).mean().item<double>();
    const double f_open = (g > 0.0).to(torch::kFloat64).mean().item<double>();
    const double p0 = p_closed(c.log_alpha, c.beta, c.lim);
    const double p1 = p_one(c.log_alpha, c.beta, c.lim);
    // Positive mass at exactly 0 and exactly 1 (the point of the stretch + clip).
    CHECK(f_zero > 0.0);
    CHECK(f_one > 0.0);
    CHECK(f_zero == Approx(p0).margin(mc_tol(p0)));
    CHECK(f_one == Approx(p1).margin(mc_tol(p1)));
    const double p_open = hp::gates::l0_expected(torch::tensor({c.log_alpha}, kF64), c.beta, c.lim).item<double>();
    CHECK(p_open == Approx(1.0 - p0).margin(1e-12));
    CHECK(f_open == Approx(p_open).margin(mc_tol(p_open)));
  }
}

TEST_CASE("l0_expected: autograd gradient equals σ' and central differences", "[gates]") {
  const double beta = 0.33;
  const StretchLimits lim;
  const double shift = beta * std::log(-lim.gamma / lim.zeta);  // P = σ(x − shift)
  const auto x = torch::tensor({-3.0, -0.7, 0.0, 1.3, 4.0}, kF64).requires_grad_(true);
  hp::gates::l0_expected(x, beta, lim).sum().backward();
  const auto grad = x.grad();
  constexpr double kFdStep = 1e-5;
  // Central differences in double: truncation O(h²) ≈ 1e-11, rounding ≈ 1e-16 / h ≈ 1e-11.
  constexpr double kFdTol = 1e-8;
  for (int i = 0; i < 5; ++i) {
    const double xi = x[i].item<double>();
    const double p = sigmoid(xi - shift);
    CHECK(grad[i].item<double>() == Approx(p * (1.0 - p)).margin(1e-14));
    const auto at = [&](double v) {
      return hp::gates::l0_expected(torch::tensor({v}, kF64), beta, lim).item<double>();
    };
    const double fd = (at(xi + kFdStep) - at(xi - kFdStep)) / (2.0 * kFdStep);
    CHECK(grad[i].item<double>() == Approx(fd).margin(kFdTol));
  }
}

TEST_CASE("hard_concrete_sample: autograd equals central differences inside (0, 1)", "[gates]") {
  const double beta = 0.5;
  const StretchLimits lim;
  const auto u = torch::tensor({0.3, 0.5, 0.6}, kF64);
  const auto x = torch::tensor({0.2, -0.4, 0.1}, kF64).requires_grad_(true);
  const auto g = hp::gates::hard_concrete_sample(x, beta, lim, u);
  REQUIRE((g > 0.0).all().item<bool>());
  REQUIRE((g < 1.0).all().item<bool>());
  g.sum().backward();
  constexpr double kFdStep = 1e-5;
  for (int i = 0; i < 3; ++i) {
    const auto xp = x.detach().clone(), xm = x.detach().clone();
    xp[i] += kFdStep;
    xm[i] -= kFdStep;
    const double fd = (hp::gates::hard_concrete_sample(xp, beta, lim, u)[i].item<double>() -
                       hp::gates::hard_concrete_sample(xm, beta, lim, u)[i].item<double>()) /
                      (2.0 * kFdStep);
    CHECK(x.grad()[i].item<double>() == Approx(fd).margin(1e-8));
  }
}

TEST_CASE("hard_concrete_noise: inside (eps, 1 - eps)", "[gates]") {
  torch::manual_seed(5);
  const auto u = hp::gates::hard_concrete_noise({100000}, kF64);
  CHECK(u.min().item<double>() >= hp::gates::kNoiseEps);
  CHECK(u.max().item<double>() <= 1.0 - hp::gates::kNoiseEps);
}
