// train/distill against a hand computation of T² KL(softmax(t/T) || softmax(s/T)), batch-averaged.
#include "train/distill.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

namespace {
// float32 softmax of values near 1: about 1e-7 relative error per term.
constexpr double kTol = 1e-5;

std::vector<double> softmax(const std::vector<double>& x, double T) {
  double z = 0;
  std::vector<double> p;
  for (double v : x) z += std::exp(v / T);
  for (double v : x) p.push_back(std::exp(v / T) / z);
  return p;
}
}  // namespace

TEST_CASE("distillation KL equals a hand computation on tiny logits", "[train]") {
  const std::vector<std::vector<double>> s = {{1.0, 2.0, 0.0}, {0.3, -1.0, 0.5}};
  const std::vector<std::vector<double>> t = {{0.5, 0.5, 2.0}, {0.0, 0.0, 0.0}};
  const double T = 2.0;
  double expected = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    auto ps = softmax(s[i], T), pt = softmax(t[i], T);
    for (size_t c = 0; c < 3; ++c) expected += pt[c] * std::log(pt[c] / ps[c]);
  }
  expected = expected / 2.0 * T * T;
  auto st = torch::tensor({1.0f, 2.0f, 0.0f, 0.3f, -1.0f, 0.5f}).view({2, 3});
  auto tt = torch::tensor({0.5f, 0.5f, 2.0f, 0.0f, 0.0f, 0.0f}).view({2, 3});
  CHECK(hp::train::distill_kl(st, tt, T).item<double>() == Approx(expected).epsilon(kTol));
  // Equal logits: zero divergence; the teacher gets no gradient.
  CHECK(hp::train::distill_kl(st, st, T).item<double>() == Approx(0.0).margin(1e-7));
  auto sg = st.clone().requires_grad_(true), tg = tt.clone().requires_grad_(true);
  hp::train::distill_kl(sg, tg, T).backward();
  CHECK(sg.grad().defined());
  CHECK(!tg.grad().defined());
  // Regression: the mean squared difference.
  auto r = hp::train::distill_loss(torch::tensor({{1.0f}, {3.0f}}), torch::tensor({{0.0f}, {1.0f}}), T, true);
  CHECK(r.item<double>() == Approx(2.5).epsilon(kTol));
}
