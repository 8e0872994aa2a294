// eval/metrics against hand-computed closed forms on tiny label sets, and against values produced
// once with Debian 12's python3-sklearn 1.2.1 / python3-scipy 1.10.1 (commands quoted beside them).
#include "eval/metrics.h"

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>

#include "core/base/correlation.h"  // average_ranks
#include "core/base/errors.h"  // InternalError
#include "core/data/glue.h"  // find_task

using Catch::Matchers::Contains;
using hp::eval::accuracy;
using hp::eval::f1_binary;
using hp::eval::matthews_corr;
using hp::eval::pearson;
using hp::eval::spearman;

namespace {
// Closed forms are exact up to double rounding of a handful of operations.
constexpr double kTol = 1e-12;

// tp=4 (0,1,2,8), fn=1 (3), fp=2 (6,7), tn=3 (4,5,9).
const std::vector<int> kGold = {1, 1, 1, 1, 0, 0, 0, 0, 1, 0};
const std::vector<int> kPred = {1, 1, 1, 0, 0, 0, 1, 1, 1, 0};
}  // namespace

TEST_CASE("accuracy, F1 and MCC on a hand-counted binary confusion matrix", "[eval]") {
  CHECK(accuracy(kPred, kGold) == Approx(7.0 / 10.0).epsilon(kTol));
  // F1 = 2tp / (2tp + fp + fn) = 8 / 11.
  CHECK(f1_binary(kPred, kGold) == Approx(8.0 / 11.0).epsilon(kTol));
  // MCC = (tp*tn - fp*fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) = 10 / sqrt(600);
  // sklearn matthews_corrcoef(gold, pred) = 0.408248290463863.
  CHECK(matthews_corr(kPred, kGold) == Approx(10.0 / std::sqrt(600.0)).epsilon(kTol));
  CHECK(matthews_corr(kPred, kGold) == Approx(0.408248290463863).epsilon(1e-12));
  // Swapping pred and gold leaves MCC unchanged; flipping every prediction negates it.
  CHECK(matthews_corr(kGold, kPred) == Approx(matthews_corr(kPred, kGold)).epsilon(kTol));
  std::vector<int> flipped;
  for (int p : kPred) flipped.push_back(1 - p);
  CHECK(matthews_corr(flipped, kGold) == Approx(-10.0 / std::sqrt(600.0)).epsilon(kTol));
}

TEST_CASE("multi-class MCC matches the Gorodkin form computed by hand", "[eval]") {
  // c=4 correct of s=6; gold counts t=(2,2,2), pred counts p=(2,3,1):
  // (c*s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t)) = (24-12) / sqrt(22*24) = 12/sqrt(528);
  // sklearn matthews_corrcoef([0,0,1,1,2,2],[0,1,1,1,2,0]) = 0.5222329678670935.
  double mcc = matthews_corr({0, 1, 1, 1, 2, 0}, {0, 0, 1, 1, 2, 2});
  CHECK(mcc == Approx(12.0 / std::sqrt(528.0)).epsilon(kTol));
  CHECK(matthews_corr({0, 1, 2, 2}, {0, 1, 2, 2}) == Approx(1.0).epsilon(kTol));
}

TEST_CASE("macro F1: each class of gold or prediction weighed alike, as sklearn's f1_score(average='macro')",
          "[eval]") {
  // Per class (tp, fp, fn): 0 -> (1, 1, 1) F1 1/2; 1 -> (2, 1, 1) 2/3; 2 -> (2, 1, 1) 2/3. Mean 0.6111...;
  // sklearn f1_score([0,1,2,2,1,0,2,1], [0,2,2,2,1,1,0,1], average="macro") = 0.611111111111111.
  CHECK(hp::eval::f1_macro({0, 2, 2, 2, 1, 1, 0, 1}, {0, 1, 2, 2, 1, 0, 2, 1}) ==
        Approx((0.5 + 2.0 / 3 + 2.0 / 3) / 3).epsilon(kTol));
  // A class only predicted counts with F1 0, as one only in gold: sklearn ([0,0,1], [0,0,3]) = 1/3.
  CHECK(hp::eval::f1_macro({0, 0, 3}, {0, 0, 1}) == Approx(1.0 / 3).epsilon(kTol));
  CHECK(std::isnan(hp::eval::f1_macro({}, {})));
}

TEST_CASE("degenerate inputs follow sklearn and scipy", "[eval]") {
  // Constant prediction: MCC denominator is 0, sklearn returns 0.
  CHECK(matthews_corr({1, 1, 1, 1}, {1, 0, 1, 0}) == 0.0);
  CHECK(matthews_corr({}, {}) == 0.0);
  // No positive anywhere: sklearn f1_score returns 0 (zero_division default).
  CHECK(f1_binary({0, 0, 0}, {0, 0, 0}) == 0.0);
  // All positives predicted, half right: precision 1/2, recall 1 -> F1 = 2/3.
  CHECK(f1_binary({1, 1, 1, 1}, {1, 0, 1, 0}) == Approx(2.0 / 3.0).epsilon(kTol));
  CHECK(std::isnan(accuracy({}, {})));
  // scipy pearsonr on a constant input returns nan (ConstantInputWarning).
  CHECK(std::isnan(pearson({1, 1, 1}, {1, 2, 3})));
  CHECK(std::isnan(spearman({2, 2, 2}, {1, 2, 3})));
  CHECK(std::isnan(pearson({1}, {2})));
  // scipy's default nan_policy="propagate": a NaN score makes both correlations NaN (spearmanr([1, 2, nan],
  // [1, 2, 3])[0] is nan), never a value over the other pairs.
  CHECK(std::isnan(pearson({1, 2, NAN}, {1, 2, 3})));
  CHECK(std::isnan(spearman({1, 2, NAN}, {1, 2, 3})));
  CHECK(std::isnan(spearman({1, 2, 3, 4}, {1, NAN, 3, 4})));
  REQUIRE_THROWS_AS(accuracy({1, 0}, {1}), hp::InternalError);
  REQUIRE_THROWS_WITH(pearson({1, 2}, {1, 2, 3}), Contains("pred has 2 values, gold has 3"));
}

TEST_CASE("Pearson and Spearman: closed forms and scipy values", "[eval]") {
  const std::vector<double> x = {1, 2, 3, 4, 5};
  std::vector<double> lin, neg, expo;
  for (double v : x) {
    lin.push_back(3 * v + 7);
    neg.push_back(-2 * v + 1);
    expo.push_back(std::exp(v));
  }
  CHECK(pearson(x, lin) == Approx(1.0).epsilon(kTol));
  CHECK(pearson(x, neg) == Approx(-1.0).epsilon(kTol));
  // Monotone but not linear: Spearman is exactly 1, Pearson is strictly below 1.
  CHECK(spearman(x, expo) == Approx(1.0).epsilon(kTol));
  CHECK(pearson(x, expo) < 0.99);
  // Ties: ranks (1, 2.5, 2.5, 4) vs (1, 3, 2, 4) -> rho = 4.5 / sqrt(4.5 * 5) = 3 / sqrt(10).
  CHECK(spearman({1, 2, 2, 3}, {1, 3, 2, 4}) == Approx(3.0 / std::sqrt(10.0)).epsilon(kTol));

  // scipy 1.10.1: pearsonr(x, y)[0], spearmanr(x, y)[0], rankdata(x).
  const std::vector<double> sx = {0.5, 1.25, 3.0, 3.0, 4.75, 2.0, 0.0, 5.0};
  const std::vector<double> sy = {1.1, 0.9, 2.8, 3.5, 4.0, 2.0, 0.2, 4.8};
  CHECK(pearson(sx, sy) == Approx(0.9741733714951913).epsilon(1e-12));
  CHECK(spearman(sx, sy) == Approx(0.9700772721497398).epsilon(1e-12));
  const std::vector<double> want_ranks = {2, 3, 5.5, 5.5, 7, 4, 1, 8};
  CHECK(hp::core::average_ranks(sx) == want_ranks);  // core/base/correlation.h, behind spearman
}

TEST_CASE("compute_metrics evaluates each task's metric set", "[eval]") {
  std::vector<float> pf(kPred.begin(), kPred.end()), gf(kGold.begin(), kGold.end());
  auto mrpc = hp::eval::compute_metrics(hp::core::find_task("mrpc"), pf, gf);
  REQUIRE(mrpc.size() == 2);
  CHECK(mrpc.at("f1") == Approx(8.0 / 11.0).epsilon(kTol));
  CHECK(mrpc.at("accuracy") == Approx(0.7).epsilon(kTol));

  auto cola = hp::eval::compute_metrics(hp::core::find_task("cola"), pf, gf);
  REQUIRE(cola.size() == 1);
  CHECK(cola.at("mcc") == Approx(10.0 / std::sqrt(600.0)).epsilon(kTol));

  // STS-B scores are not rounded: ranks (1, 2.5, 2.5, 4) vs (1, 3, 2, 4) as above.
  auto stsb =
      hp::eval::compute_metrics(hp::core::find_task("stsb"), {0.5f, 2.25f, 2.25f, 4.0f}, {1.0f, 3.5f, 2.0f, 4.5f});
  CHECK(stsb.at("spearman") == Approx(3.0 / std::sqrt(10.0)).epsilon(1e-9));
  CHECK(stsb.count("pearson") == 1);

  // Every metric named in the task table is one compute_metrics knows.
  const auto known = hp::eval::metric_names();
  for (const auto& name : hp::core::task_names()) {
    const auto& task = hp::core::find_task(name);
    for (const auto& m : task.metrics) {
      INFO(name << " metric " << m);
      CHECK(std::find(known.begin(), known.end(), m) != known.end());
    }
    CHECK(std::find(task.metrics.begin(), task.metrics.end(), task.primary_metric) != task.metrics.end());
  }
}

TEST_CASE(
    "paired bootstrap of a metric difference: the difference itself, an interval that matches the normal "
    "approximation for accuracy, identical models at zero, and seeded",
    "[eval]") {
  const auto& sst2 = hp::core::find_task("sst2");
  // 400 examples: b is right on the first 300, a on the first 280 and on 60 of b's 100 misses, so a − b = +0.1
  // with per-example differences d ∈ {+1 (60), −1 (20), 0 (320)}.
  const size_t n = 400;
  std::vector<float> gold(n, 1.0f), a(n, 0.0f), b(n, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    b[i] = i < 300 ? 1.0f : 0.0f;
    a[i] = (i < 280 || (i >= 300 && i < 360)) ? 1.0f : 0.0f;
  }
  const auto d = hp::eval::paired_bootstrap(sst2, "accuracy", a, b, gold, 4000, 0.9, 7);
  CHECK(d.delta == Approx(0.1).margin(1e-12));
  // The resampled mean of d has standard deviation sd(d)/√n (population sd), so the 90% interval is close to
  // delta ± 1.645·sd/√n: sd = √(E[d²] − E[d]²) = √(80/400 − 0.01) = √0.19.
  const double half = 1.6449 * std::sqrt(0.19) / std::sqrt(static_cast<double>(n));
  CHECK(d.lo == Approx(0.1 - half).margin(0.15 * half));
  CHECK(d.hi == Approx(0.1 + half).margin(0.15 * half));
  // The same seed, the same interval; the same predictions, nothing to tell apart.
  const auto again = hp::eval::paired_bootstrap(sst2, "accuracy", a, b, gold, 4000, 0.9, 7);
  CHECK(again.lo == d.lo);
  CHECK(again.hi == d.hi);
  const auto same = hp::eval::paired_bootstrap(sst2, "accuracy", a, a, gold, 500, 0.9, 7);
  CHECK(same.delta == 0);
  CHECK(same.lo == 0);
  CHECK(same.hi == 0);
  // Paired: the models' shared errors cancel, so the interval is narrower than independent samples of the two
  // would give (variance 0.85·0.15 + 0.75·0.25 = 0.315 per example against the paired 0.19).
  CHECK(d.hi - d.lo < 2 * 1.6449 * std::sqrt(0.315) / std::sqrt(static_cast<double>(n)) * 0.85);
  // Undefined in every resample (Spearman of a constant model): the difference alone, undefined.
  const auto& stsb = hp::core::find_task("stsb");
  std::vector<float> score(n), flat(n, 2.5f);
  for (size_t i = 0; i < n; ++i) score[i] = static_cast<float>(i % 17);
  const auto u = hp::eval::paired_bootstrap(stsb, "spearman", score, flat, score, 50, 0.9, 7);
  CHECK(std::isnan(u.delta));
  CHECK(std::isnan(u.lo));
  CHECK(std::isnan(u.hi));
  CHECK_THROWS_AS(hp::eval::paired_bootstrap(sst2, "accuracy", a, std::vector<float>(3), gold, 10, 0.9, 7),
                  hp::InternalError);
}
