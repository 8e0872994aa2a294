// The curve summaries on hand-made points: the bootstrap interval of a point's metric against the binomial
// normal approximation, seeds averaged, the curve area, and the largest fraction pruned within a tolerance.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/data/glue.h"
#include "prune/heads/curves.h"
#include "prune/heads/report.h"

using hp::prune::Aggregate;
using hp::prune::CurvePoint;

namespace {

// A point of `criterion` at schedule step `step` whose predictions get the first `correct` of `n` right.
CurvePoint point(const std::string& criterion, int seed, int step, int n, int correct) {
  CurvePoint p;
  p.criterion = criterion, p.seed = seed, p.step = step, p.pruned = 2 * step, p.kept = 8 - 2 * step;
  for (int i = 0; i < n; ++i) p.predictions.push_back(i < correct ? 1.0f : 0.0f);  // gold is all 1
  p.metrics["accuracy"] = static_cast<double>(correct) / n;
  return p;
}

// sst2's objective on an evaluation split of `n` rows, all labelled 1.
struct AllOnes {
  hp::core::EncodedDataset data;
  std::vector<hp::core::Batch> batches;
  std::unique_ptr<hp::prune::Objective> objective;
  explicit AllOnes(int n) {
    data.labels.assign(n, 1.0f), data.has_labels = true;
    objective =
        hp::prune::make_task_objective({&hp::core::find_task("sst2"), &data, &data, &batches, &batches, "", nullptr});
  }
};

Aggregate agg(const std::string& criterion, int pruned, double mean) {
  Aggregate a;
  a.criterion = criterion, a.pruned = pruned, a.mean = mean;
  return a;
}

}  // namespace

TEST_CASE("aggregate: bootstrap 95% interval of accuracy against the binomial normal approximation",
          "[prune][curves]") {
  const int n = 400;
  const AllOnes eval(n);
  const auto a = hp::prune::aggregate({point("x", 42, 0, n, 200), point("x", 42, 1, n, n)}, *eval.objective, 2000, 1);
  REQUIRE(a.size() == 2);
  // p = 0.5, n = 400: 0.5 ± 1.96·sqrt(0.25/400) = 0.5 ± 0.049; a 2000-resample percentile interval lands
  // within ±0.005 of that (the quantile of 2000 resamples varies by ~0.002; accuracy steps by 0.0025).
  CHECK(a[0].mean == Approx(0.5));
  CHECK(a[0].lo == Approx(0.5 - 0.049).margin(0.005));
  CHECK(a[0].hi == Approx(0.5 + 0.049).margin(0.005));
  // Every resample of all-correct predictions is 1.
  CHECK(a[1].lo == 1.0);
  CHECK(a[1].hi == 1.0);
  CHECK(a[1].pruned == 2);
}

TEST_CASE("aggregate: seeds are averaged per point, and so is their bootstrap", "[prune][curves]") {
  const AllOnes eval(100);
  const auto a = hp::prune::aggregate({point("x", 1, 0, 100, 60), point("x", 2, 0, 100, 80)}, *eval.objective, 500, 3);
  REQUIRE(a.size() == 1);
  CHECK(a[0].seeds == 2);
  CHECK(a[0].mean == Approx(0.7));
  CHECK(a[0].lo < 0.7);
  CHECK(a[0].hi > 0.7);
  // Both seeds are resampled on the same examples (paired): an example counts 1 when both get it right
  // (60 of 100), 0.5 when one does (20), 0 otherwise, so the per-example variance is 0.65 − 0.7² = 0.16, the
  // mean's sd sqrt(0.16/100) = 0.04 and the interval ±1.96·0.04 = ±0.078 (±0.015). Independent seeds would
  // give ±0.062.
  CHECK(a[0].hi - a[0].lo == Approx(2 * 0.0784).margin(0.015));
}

TEST_CASE("curve area and the largest fraction within a tolerance, on hand-made points", "[prune][curves]") {
  // "a" dips at 4 of 8 heads pruned and recovers at 6: the largest point within 0.01 is 6/8, not 2/8.
  const std::vector<Aggregate> points = {agg("a", 0, 0.90), agg("a", 2, 0.895), agg("a", 4, 0.85), agg("a", 6, 0.891),
                                         agg("b", 0, 0.90), agg("b", 2, 0.88),  agg("b", 4, 0.70)};
  const auto within = hp::prune::largest_fraction_within(points, 8, 0.01);
  CHECK(within.at("a") == Approx(0.75));
  CHECK(within.at("b") == Approx(0.0));
  const auto area = hp::prune::curve_area(points);
  CHECK(area.at("a") == Approx((0.90 + 0.895 + 0.85 + 0.891) / 4));
  CHECK(area.at("b") == Approx((0.90 + 0.88 + 0.70) / 3));
}
