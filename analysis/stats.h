// Statistics of `prune analyze` on accumulated numbers (analysis/DEFINITIONS.md §3, §6, §8): Pande
// et al.'s one-sided t-test, Holm and BH corrections, Spearman rho, hypergeometric enrichment and
// the classical MDS head map, each beside its scipy/statsmodels twin. Torch-free (Eigen, Boost).
// The pass over attention maps lives in hp_analysis; CoNLL-U input in core/data/conllu.h.
#pragma once

#include <Eigen/Dense>
#include <cmath>
#include <vector>

namespace hp::analysis {

// Result of ttest_greater; n counts the non-NaN entries.
struct TTest {
  double mean = NAN, sd = NAN, t = NAN, p = NAN;
  long n = 0;
};

// One-sided t-test, H0: mean <= tau (scipy ttest_1samp(x, tau, alternative="greater")), sd ddof 1.
// NaN entries are ignored; n < 2 or sd == 0 gives t = p = NaN (mean, sd, n still filled).
TTest ttest_greater(const std::vector<double>& x, double tau);

// P(T_df >= t), accurate far into the upper tail (scipy.stats.t.sf); NaN for NaN t or df <= 0.
double student_t_sf(double t, double df);

// Holm / Benjamini–Hochberg adjusted p-values: statsmodels multipletests pvals_corrected to 1-2
// ulps. NaN stays NaN, outside the family (m = non-NaN count). Non-NaN p must lie in [0, 1].
std::vector<double> holm_adjust(const std::vector<double>& p);
std::vector<double> bh_adjust(const std::vector<double>& p);

// reject[i] = adjusted[i] <= alpha (NaN -> false). With holm_adjust / bh_adjust and 0 < alpha < 1
// this is exactly statsmodels' reject set, also for p-values that sit on a threshold.
std::vector<bool> rejected(const std::vector<double>& adjusted, double alpha);

// Spearman rho with average ranks for ties (scipy.stats.spearmanr(x, y, nan_policy="omit")): pairs with
// a NaN on either side (heads absent from a model) are dropped; NaN when fewer than 2 pairs remain or one
// side is constant. core/base/correlation.h with NanPolicy::kOmit, the implementation eval's metric shares.
double spearman(const std::vector<double>& x, const std::vector<double>& y);

// Hypergeometric upper tail P(X >= k): population N, K successes in it, n draws
// (scipy.stats.hypergeom.sf(k - 1, N, K, n)). Needs 0 <= K <= N and 0 <= n <= N.
double hypergeom_sf(long k, long N, long K, long n);

// Classical MDS, d: [N, N] symmetric, N >= 2 -> [N, 2]: B = -1/2 J (d∘d) J, top two eigenpairs,
// eigvec * sqrt(max(eigval, 0)), each axis' largest-|x| coordinate made positive.
Eigen::MatrixXd classical_mds(const Eigen::MatrixXd& d);

}  // namespace hp::analysis
