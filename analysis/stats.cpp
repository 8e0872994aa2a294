// Statistics of `prune analyze`; the scipy/statsmodels twin of each function is named in stats.h.
#include "analysis/stats.h"

#include <algorithm>
#include <boost/math/distributions/hypergeometric.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <numeric>

#include "core/base/correlation.h"  // spearman (header-only, torch-free)
#include "core/base/errors.h"  // HP_CHECK (header-only, torch-free)

namespace hp::analysis {
namespace {

// Indices of the non-NaN entries of p, ordered by p (stable, so ties keep their input order).
std::vector<size_t> sorted_finite(const std::vector<double>& p) {
  std::vector<size_t> order;
  for (size_t i = 0; i < p.size(); ++i) {
    HP_CHECK(std::isnan(p[i]) || (p[i] >= 0.0 && p[i] <= 1.0), "p-value " << p[i] << " at " << i);
    if (!std::isnan(p[i])) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  return order;
}

// The smallest double a >= 0 with passes(a), for passes monotone in a; a0 is a guess within a few
// ulps.
template <class Passes>
double smallest_alpha(double a0, Passes passes) {
  double a = std::max(a0, 0.0);
  if (passes(a)) {
    while (a > 0.0 && passes(std::nextafter(a, 0.0))) a = std::nextafter(a, 0.0);
  } else {
    while (!passes(a)) a = std::nextafter(a, INFINITY);
  }
  return a;
}

}  // namespace

TTest ttest_greater(const std::vector<double>& x, double tau) {
  std::vector<double> v;
  for (double xi : x)
    if (!std::isnan(xi)) v.push_back(xi);
  TTest r;
  r.n = static_cast<long>(v.size());
  if (v.empty()) return r;
  const double n = static_cast<double>(v.size());
  r.mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
  if (r.n < 2) return r;
  double ss = 0.0;  // two passes, as numpy's var: no cancellation from sum(x^2) - n mean^2
  for (double xi : v) ss += (xi - r.mean) * (xi - r.mean);
  const double var = ss / (n - 1.0);
  r.sd = std::sqrt(var);
  if (r.sd == 0.0) return r;
  r.t = (r.mean - tau) / std::sqrt(var / n);  // scipy's order of operations
  r.p = student_t_sf(r.t, n - 1.0);
  return r;
}

double student_t_sf(double t, double df) {
  if (std::isnan(t) || !(df > 0.0)) return NAN;
  // complement() computes the upper tail itself (incomplete beta), not 1 - cdf: keeps p ~ 1e-300.
  const boost::math::students_t_distribution<double> dist(df);
  return boost::math::cdf(boost::math::complement(dist, t));
}

// statsmodels decides `reject` by comparing p with alpha / k (Holm) or with (i / m) * alpha (BH),
// and rounds pvals_corrected = p * k or p / (i / m) separately, so at p = alpha / k the two can
// disagree by an ulp (statsmodels' own pvals_corrected <= alpha is not its reject set for m >= 11
// on Holm thresholds). We return the smallest double alpha at which statsmodels' comparison
// rejects: rejected() then matches its reject set exactly, and the value is within 1-2 ulps of
// pvals_corrected.
std::vector<double> holm_adjust(const std::vector<double>& p) {
  std::vector<double> out(p.size(), NAN);
  const std::vector<size_t> order = sorted_finite(p);
  const size_t m = order.size();
  double running = 0.0;  // step-down: the adjusted values never decrease along the sorted order
  for (size_t i = 0; i < m; ++i) {
    const double pi = p[order[i]], k = static_cast<double>(m - i);
    running = std::max(running, smallest_alpha(pi * k, [&](double a) { return !(pi > a / k); }));
    out[order[i]] = std::min(running, 1.0);
  }
  return out;
}

std::vector<double> bh_adjust(const std::vector<double>& p) {
  std::vector<double> out(p.size(), NAN);
  const std::vector<size_t> order = sorted_finite(p);
  const size_t m = order.size();
  double running = INFINITY;  // step-up: the minimum over this and every larger p
  for (size_t i = m; i-- > 0;) {
    const double pi = p[order[i]];
    const double c = static_cast<double>(i + 1) / static_cast<double>(m);  // statsmodels' _ecdf
    running = std::min(running, smallest_alpha(pi / c, [&](double a) { return pi <= c * a; }));
    out[order[i]] = std::min(running, 1.0);
  }
  return out;
}

std::vector<bool> rejected(const std::vector<double>& adjusted, double alpha) {
  std::vector<bool> r(adjusted.size());
  for (size_t i = 0; i < adjusted.size(); ++i) r[i] = adjusted[i] <= alpha;  // NaN compares false
  return r;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  return core::spearman(x, y, core::NanPolicy::kOmit);
}

double hypergeom_sf(long k, long N, long K, long n) {
  HP_CHECK(N >= 0 && K >= 0 && K <= N && n >= 0 && n <= N, "hypergeom_sf: N=" << N << " K=" << K << " n=" << n);
  const long lo = std::max(0L, n + K - N), hi = std::min(K, n);  // the support of X
  if (k <= lo) return 1.0;
  if (k > hi) return 0.0;
  // Boost's (r = successes, n = draws, N = population); its cdf rejects x outside the support,
  // hence the guards.
  const boost::math::hypergeometric_distribution<double> dist(static_cast<unsigned>(K), static_cast<unsigned>(n),
                                                              static_cast<unsigned>(N));
  return boost::math::cdf(boost::math::complement(dist, static_cast<unsigned>(k - 1)));
}

Eigen::MatrixXd classical_mds(const Eigen::MatrixXd& d) {
  const Eigen::Index N = d.rows();
  HP_CHECK(d.cols() == N && N >= 2, "classical_mds: d is " << d.rows() << "x" << d.cols());
  const Eigen::MatrixXd d2 = d.cwiseProduct(d);
  // (S + S^T) / 2 equals S bit for bit when d is symmetric, and keeps B symmetric when d is off by
  // rounding.
  const Eigen::MatrixXd s = 0.5 * (d2 + d2.transpose());
  const Eigen::MatrixXd j =
      Eigen::MatrixXd::Identity(N, N) - Eigen::MatrixXd::Constant(N, N, 1.0 / static_cast<double>(N));
  const Eigen::MatrixXd b = -0.5 * j * s * j;
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(b);
  HP_CHECK(es.info() == Eigen::Success, "classical_mds: eigen decomposition failed");
  Eigen::MatrixXd x(N, 2);
  for (int axis = 0; axis < 2; ++axis) {
    const Eigen::Index col = N - 1 - axis;  // eigenvalues come in increasing order
    x.col(axis) = es.eigenvectors().col(col) * std::sqrt(std::max(es.eigenvalues()(col), 0.0));
    Eigen::Index at = 0;  // the first largest |x|, as numpy's argmax
    for (Eigen::Index r = 1; r < N; ++r)
      if (std::abs(x(r, axis)) > std::abs(x(at, axis))) at = r;
    if (x(at, axis) < 0.0) x.col(axis) *= -1.0;
  }
  return x;
}

}  // namespace hp::analysis
