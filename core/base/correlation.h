// Pearson's r, average ranks and Spearman's rho: the one implementation behind the STS-B metrics
// (eval/metrics.h) and `prune analyze`'s links to pruning (analysis/stats.h). Header-only and torch-free,
// like errors.h, so that hp_analysis_math (Eigen and Boost, no core library) uses it too.
// Each is its scipy 1.10 twin. NaN: scipy's nan_policy, picked by the caller. kPropagate (scipy's default)
// makes any NaN the result: an STS-B score that went NaN must not vanish from the metric. kOmit drops the
// pairs with a NaN on either side: the heads absent from a model are NaN in the analysis grids.
// Degenerate inputs give NaN as in scipy: fewer than 2 pairs (after dropping), or a constant side.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/base/errors.h"  // HP_CHECK

namespace hp::core {

// What a NaN on either side of a pair does (scipy's nan_policy "propagate" / "omit").
enum class NanPolicy { kPropagate, kOmit };

// Pearson's r (scipy.stats.pearsonr). NaN for fewer than 2 values, a constant input or any NaN. x and y
// must have one size (InternalError).
inline double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  HP_CHECK(x.size() == y.size(), "pearson: " << x.size() << " vs " << y.size() << " values");
  const size_t n = x.size();
  if (n < 2) return std::numeric_limits<double>::quiet_NaN();
  // Two passes (mean first) rather than sum-of-squares formulas: no cancellation for large offsets.
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(n);
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(n);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    const double dx = x[i] - mx, dy = y[i] - my;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (sxx == 0 || syy == 0) return std::numeric_limits<double>::quiet_NaN();  // constant: scipy warns, nan
  return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);  // rounding can push |r| a hair past 1; scipy clips
}

// 1-based ranks, ties share their average (scipy.stats.rankdata method="average"); all NaN if any x is NaN
// (also keeps NaN out of the sort, where it would break the strict weak order).
inline std::vector<double> average_ranks(const std::vector<double>& x) {
  const size_t n = x.size();
  if (std::any_of(x.begin(), x.end(), [](double v) { return std::isnan(v); }))
    return std::vector<double>(n, std::numeric_limits<double>::quiet_NaN());
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> rank(n);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && x[order[j + 1]] == x[order[i]]) ++j;
    const double r = 0.5 * static_cast<double>(i + j) + 1.0;  // the mean of the 1-based ranks i+1 .. j+1
    for (size_t q = i; q <= j; ++q) rank[order[q]] = r;
    i = j + 1;
  }
  return rank;
}

// Spearman's rho: Pearson of the average ranks (scipy.stats.spearmanr(x, y, nan_policy=...)).
inline double spearman(const std::vector<double>& x, const std::vector<double>& y, NanPolicy nan) {
  HP_CHECK(x.size() == y.size(), "spearman: " << x.size() << " vs " << y.size() << " values");
  if (nan == NanPolicy::kPropagate) return pearson(average_ranks(x), average_ranks(y));
  std::vector<double> a, b;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) continue;
    a.push_back(x[i]);
    b.push_back(y[i]);
  }
  return pearson(average_ranks(a), average_ranks(b));
}

}  // namespace hp::core
