// analysis/stats against scipy 1.10.1 / statsmodels 0.13.5 / numpy goldens
// (tests/golden/make_stats_goldens.py writes tests/data/golden/analysis_stats.json) and against
// closed forms computed by hand.
#include "analysis/stats.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/base/correlation.h"
#include "fixtures.h"

using namespace hp::analysis;
using hp::core::average_ranks;  // behind spearman
using nlohmann::json;

namespace {
// Same formulas in another summation order (numpy's pairwise sums): agreement to a few ulps,
// amplified by at most |tau| / |mean - tau| < 200 in the goldens' t.
constexpr double kExactTol = 1e-12;
// Boost's incomplete beta vs cephes' stdtr (scipy), also ~1e-30 deep in the tail.
constexpr double kPTol = 1e-9;
// Boost's hypergeometric sum vs scipy's.
constexpr double kHyperTol = 1e-10;
// Eigen's vs LAPACK's symmetric eigensolver on a 9x9 matrix with well-separated top eigenvalues.
constexpr double kMdsTol = 1e-8;
const double kPi = std::acos(-1.0);

const json& golden() {
  static const json g = [] {
    std::ifstream f(hp::test::kStatsGolden);
    REQUIRE(f.good());
    return json::parse(f);
  }();
  return g;
}

// JSON null stands for NaN (JSON has no NaN).
double num(const json& v) { return v.is_null() ? NAN : v.get<double>(); }
std::vector<double> nums(const json& a) {
  std::vector<double> v;
  for (const json& e : a) v.push_back(num(e));
  return v;
}

// Relative closeness; NaN only matches NaN and 0 only matches 0.
bool close(double got, double want, double rel) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  return std::abs(got - want) <= rel * std::abs(want);
}
#define CHECK_CLOSE(got, want, rel)                                                 \
  do {                                                                              \
    const double got_ = (got), want_ = (want);                                      \
    INFO(#got " = " << got_ << ", expected " << want_ << " (rel " << (rel) << ")"); \
    CHECK(close(got_, want_, (rel)));                                               \
  } while (0)
}  // namespace

TEST_CASE("ttest_greater matches scipy ttest_1samp(alternative='greater')", "[analysis]") {
  for (const json& c : golden().at("ttest")) {
    INFO("case " << c.at("name").get<std::string>());
    const TTest r = ttest_greater(nums(c.at("x")), c.at("tau").get<double>());
    CHECK(r.n == c.at("n").get<long>());
    CHECK_CLOSE(r.mean, num(c.at("mean")), kExactTol);
    CHECK_CLOSE(r.sd, num(c.at("sd")), kExactTol);
    CHECK_CLOSE(r.t, num(c.at("t")), kExactTol);
    CHECK_CLOSE(r.p, num(c.at("p")), kPTol);
  }
}

TEST_CASE("ttest_greater of {1,2,3} against tau = 0 matches the t(2) closed form", "[analysis]") {
  const TTest r = ttest_greater({1.0, 2.0, 3.0}, 0.0);
  // mean 2, sd 1, t = 2 / (1 / sqrt(3)); t(2): P(T >= t) = (1 - t / sqrt(t^2 + 2)) / 2.
  const double t = 2.0 * std::sqrt(3.0);
  CHECK(r.n == 3);
  CHECK_CLOSE(r.mean, 2.0, kExactTol);
  CHECK_CLOSE(r.sd, 1.0, kExactTol);
  CHECK_CLOSE(r.t, t, kExactTol);
  CHECK_CLOSE(r.p, 0.5 * (1.0 - t / std::sqrt(t * t + 2.0)), kExactTol);
  // NaN entries are ignored.
  const TTest with_nan = ttest_greater({NAN, 1.0, 2.0, NAN, 3.0}, 0.0);
  CHECK(with_nan.n == 3);
  CHECK_CLOSE(with_nan.t, t, kExactTol);
  CHECK_CLOSE(with_nan.p, r.p, kExactTol);
}

TEST_CASE("ttest_greater leaves p NaN for n < 2 and sd = 0", "[analysis]") {
  const TTest one = ttest_greater({5.0, NAN}, 3.0);
  CHECK(one.n == 1);
  CHECK(one.mean == 5.0);
  CHECK(std::isnan(one.sd));
  CHECK(std::isnan(one.p));
  const TTest flat = ttest_greater({4.0, 4.0, 4.0}, 3.0);
  CHECK(flat.n == 3);
  CHECK(flat.mean == 4.0);
  CHECK(flat.sd == 0.0);
  CHECK(std::isnan(flat.t));
  CHECK(std::isnan(flat.p));
  const TTest none = ttest_greater({}, 3.0);
  CHECK(none.n == 0);
  CHECK(std::isnan(none.mean));
  CHECK(std::isnan(none.p));
}

TEST_CASE("student_t_sf matches the t(1) and t(2) closed forms far into the tail", "[analysis]") {
  for (double t : {-30.0, -2.0, 0.0, 0.5, 3.0, 1e3, 1e8, 1e15}) {
    INFO("t = " << t);
    // Cauchy: P(T >= t) = 1/2 - atan(t)/pi, written as atan(1/t)/pi for t > 0 to keep the tail's
    // digits.
    CHECK_CLOSE(student_t_sf(t, 1.0), t > 0 ? std::atan(1.0 / t) / kPi : 0.5 - std::atan(t) / kPi, 1e-12);
    // t(2): (1 - t/s)/2 with s = sqrt(t^2 + 2), written as 1/((s + t) s) for t > 0 (no
    // cancellation).
    const double s = std::sqrt(t * t + 2.0);
    CHECK_CLOSE(student_t_sf(t, 2.0), t > 0 ? 1.0 / ((s + t) * s) : 0.5 * (1.0 - t / s), 1e-12);
  }
  CHECK(std::isnan(student_t_sf(NAN, 3.0)));
  CHECK(std::isnan(student_t_sf(1.0, 0.0)));
}

TEST_CASE("holm_adjust, bh_adjust and rejected match statsmodels multipletests", "[analysis]") {
  for (const json& c : golden().at("families")) {
    INFO("family " << c.at("name").get<std::string>());
    const std::vector<double> p = nums(c.at("p"));
    const double alpha = c.at("alpha").get<double>();
    for (const char* method : {"holm", "fdr_bh"}) {
      INFO("method " << method);
      const std::vector<double> adj = std::string(method) == "holm" ? holm_adjust(p) : bh_adjust(p);
      const std::vector<double> want = nums(c.at(method).at("corrected"));
      REQUIRE(adj.size() == want.size());
      for (size_t i = 0; i < adj.size(); ++i) {
        INFO("i = " << i << ", p = " << p[i]);
        CHECK_CLOSE(adj[i], want[i], kExactTol);
      }
      // Exactly statsmodels' reject set, also where p sits on a threshold (holm_thresholds,
      // bh_thresholds).
      CHECK(rejected(adj, alpha) == c.at(method).at("reject").get<std::vector<bool>>());
    }
  }
}

TEST_CASE("holm_adjust and bh_adjust of a hand-made family", "[analysis]") {
  // Sorted: 0.005, 0.01, 0.03, 0.04. Holm: max-accumulate of p * (4, 3, 2, 1) = 0.02, 0.03, 0.06,
  // 0.06. BH: min-accumulate from the top of p * 4 / (1, 2, 3, 4) = 0.02, 0.02, 0.04, 0.04.
  const std::vector<double> p = {0.01, NAN, 0.04, 0.03, 0.005, NAN};
  const std::vector<double> holm = holm_adjust(p), bh = bh_adjust(p);
  const std::vector<double> want_holm = {0.03, NAN, 0.06, 0.06, 0.02, NAN};
  const std::vector<double> want_bh = {0.02, NAN, 0.04, 0.04, 0.02, NAN};
  for (size_t i = 0; i < p.size(); ++i) {
    CHECK_CLOSE(holm[i], want_holm[i], kExactTol);
    CHECK_CLOSE(bh[i], want_bh[i], kExactTol);
  }
  CHECK(rejected(holm, 0.05) == std::vector<bool>{true, false, false, false, true, false});
  CHECK(rejected(bh, 0.05) == std::vector<bool>{true, false, true, true, true, false});
  // Products above 1 are clipped: Holm 0.4 * 3 = 1.2 -> 1.
  CHECK(holm_adjust({0.4, 0.9, 0.7}) == std::vector<double>{1.0, 1.0, 1.0});
  CHECK(holm_adjust({}).empty());
}

TEST_CASE("spearman and average_ranks match scipy spearmanr and rankdata", "[analysis]") {
  for (const json& c : golden().at("spearman")) {
    INFO("case " << c.at("name").get<std::string>());
    CHECK_CLOSE(spearman(nums(c.at("x")), nums(c.at("y"))), num(c.at("rho")), kExactTol);
  }
  for (const json& c : golden().at("ranks")) CHECK(average_ranks(nums(c.at("x"))) == nums(c.at("ranks")));
}

TEST_CASE("spearman with ties, NaN and degenerate inputs by hand", "[analysis]") {
  // ranks (1,2,3,4) vs (1.5,1.5,3.5,3.5): sum dx dy = 4, sum dx^2 = 5, sum dy^2 = 4 -> 4 /
  // sqrt(20).
  CHECK_CLOSE(spearman({1, 2, 3, 4}, {10, 10, 20, 20}), 2.0 / std::sqrt(5.0), kExactTol);
  CHECK_CLOSE(spearman({1, NAN, 2, 3, 4, 5}, {10, 0, 10, 20, NAN, 20}), 2.0 / std::sqrt(5.0), kExactTol);
  CHECK(spearman({1, 2, 3}, {9, 4, 1}) == -1.0);
  // scipy spearmanr(x, y, nan_policy="omit"): 2 pairs left give +-1 ([2, nan, 1] vs [1, 2, 5]: -1.0); with
  // fewer scipy raises and we return NaN.
  CHECK(spearman({2, NAN, 1}, {1, 2, 5}) == -1.0);
  CHECK(std::isnan(spearman({1, NAN, 3}, {2, 1, NAN})));  // 1 pair left
  CHECK(std::isnan(spearman({1, 2, 3}, {5, 5, 5})));  // constant side
  CHECK(average_ranks({2.0, 1.0, 2.0, 0.5}) == std::vector<double>{3.5, 2.0, 3.5, 1.0});
  const std::vector<double> nan_ranks = average_ranks({1.0, NAN});
  CHECK((std::isnan(nan_ranks[0]) && std::isnan(nan_ranks[1])));
}

TEST_CASE("hypergeom_sf matches scipy hypergeom.sf(k - 1, N, K, n)", "[analysis]") {
  for (const json& c : golden().at("hypergeom")) {
    const long k = c.at("k"), N = c.at("N"), K = c.at("K"), n = c.at("n");
    INFO("k=" << k << " N=" << N << " K=" << K << " n=" << n);
    CHECK_CLOSE(hypergeom_sf(k, N, K, n), num(c.at("sf")), kHyperTol);
  }
  // Closed forms: P(X >= n) = C(K, n) / C(N, n); one success in N, one draw: 1/N.
  CHECK_CLOSE(hypergeom_sf(5, 10, 8, 5), 56.0 / 252.0, kExactTol);
  CHECK_CLOSE(hypergeom_sf(1, 144, 1, 1), 1.0 / 144.0, kExactTol);
  CHECK(hypergeom_sf(-2, 144, 40, 20) == 1.0);
}

TEST_CASE("classical_mds matches numpy eigh with the same sign rule", "[analysis]") {
  const json& c = golden().at("mds");
  const std::vector<std::vector<double>> d = c.at("d"), want = c.at("coords");
  Eigen::MatrixXd dm(d.size(), d.size());
  for (size_t i = 0; i < d.size(); ++i)
    for (size_t j = 0; j < d.size(); ++j) dm(i, j) = d[i][j];
  const Eigen::MatrixXd x = classical_mds(dm);
  REQUIRE(x.rows() == static_cast<Eigen::Index>(want.size()));
  REQUIRE(x.cols() == 2);
  for (size_t i = 0; i < want.size(); ++i)
    for (int a = 0; a < 2; ++a) CHECK(std::abs(x(i, a) - want[i][a]) <= kMdsTol);
}

TEST_CASE("classical_mds of 3 collinear points reproduces their distances", "[analysis]") {
  // Points 0, 1, 3 on a line: centred -4/3, -1/3, 5/3; 5/3 has the largest |x|, so it is positive.
  Eigen::MatrixXd d(3, 3);
  d << 0, 1, 3, 1, 0, 2, 3, 2, 0;
  const Eigen::MatrixXd x = classical_mds(d);
  CHECK(std::abs(x(0, 0) + 4.0 / 3.0) <= kExactTol);
  CHECK(std::abs(x(1, 0) + 1.0 / 3.0) <= kExactTol);
  CHECK(std::abs(x(2, 0) - 5.0 / 3.0) <= kExactTol);
  // The second eigenvalue is 0 up to rounding (~1e-16), and its square root scales the axis: ~1e-8.
  CHECK(x.col(1).cwiseAbs().maxCoeff() <= 1e-7);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) CHECK(std::abs((x.row(i) - x.row(j)).norm() - d(i, j)) <= 1e-7);
}
