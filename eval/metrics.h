// GLUE metrics: accuracy, binary F1, Matthews correlation, Pearson and Spearman, plus
// compute_metrics() which evaluates the metric set named in a task's row (core/data/glue.h). Torch-free.
// Degenerate inputs follow sklearn 1.2 / scipy 1.10: undefined F1 and MCC give 0, constant or
// too-short inputs give NaN for correlations, empty input gives NaN for accuracy.
#pragma once

#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/data/glue.h"  // TaskSpec

namespace hp::eval {

// Fraction of positions where pred == gold; NaN when empty. Sizes must match (InternalError).
double accuracy(const std::vector<int>& pred, const std::vector<int>& gold);

// F1 of class 1 (sklearn f1_score, pos_label=1): 2tp / (2tp + fp + fn); 0 when tp+fp+fn == 0.
double f1_binary(const std::vector<int>& pred, const std::vector<int>& gold);
// F1 of each class found in gold or pred, averaged with equal weights (sklearn's f1_score(average="macro")).
double f1_macro(const std::vector<int>& pred, const std::vector<int>& gold);

// Matthews correlation, multi-class form (Gorodkin 2004, as sklearn matthews_corrcoef); reduces to
// (tp*tn - fp*fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) for two classes. 0 when the denominator is 0.
double matthews_corr(const std::vector<int>& pred, const std::vector<int>& gold);

// Pearson's r (scipy.stats.pearsonr). NaN if fewer than 2 values, either input is constant or holds a NaN.
double pearson(const std::vector<double>& x, const std::vector<double>& y);

// Spearman's rho, ties get their average rank (scipy.stats.spearmanr): core/base/correlation.h with
// NanPolicy::kPropagate, so a NaN prediction makes it NaN, as it does Pearson's r.
double spearman(const std::vector<double>& x, const std::vector<double>& y);

// Every metric in task.metrics, keyed by that name. pred/gold: class indices stored as floats
// (rounded to the nearest int) for classification, scores for regression; a tagger's tags sentence after sentence,
// each sentence closed by core::kSentenceEnd in both: accuracy over the tags, entity_f1, entity_precision and
// entity_recall as seqeval scores the sentences (eval/seqeval.h).
std::map<std::string, double> compute_metrics(const core::TaskSpec& task, const std::vector<float>& pred,
                                              const std::vector<float>& gold);

// How much better `a` scores than `b` on the same examples, with its uncertainty: the `metric` of a minus that of b
// (both from compute_metrics), and the (1 − level)/2 and (1 + level)/2 quantiles of that difference over
// `resamples` paired bootstrap resamples of the examples (the same indices for both), seeded by `seed`. Resamples
// whose difference is undefined (a correlation of constant values) are left out; lo = hi = the difference when
// none is left, there are fewer than 2 examples, or resamples is 0. Sizes must match (InternalError).
struct PairedDelta {
  double delta = 0, lo = 0, hi = 0;
};
// The metric of predictions against gold rows (a bootstrap's resample).
using RowMetric = std::function<double(const std::vector<float>& predictions, const std::vector<float>& gold)>;
PairedDelta paired_bootstrap(const RowMetric& metric, const std::vector<float>& a, const std::vector<float>& b,
                             const std::vector<float>& gold, int resamples, double level, unsigned long long seed);
// The same for `task`'s `metric` (compute_metrics).
PairedDelta paired_bootstrap(const core::TaskSpec& task, const std::string& metric, const std::vector<float>& a,
                             const std::vector<float>& b, const std::vector<float>& gold, int resamples, double level,
                             unsigned long long seed);

// Names compute_metrics understands, in table order, then a tagger's entity scores.
std::vector<std::string> metric_names();

// One bootstrap resample of the rows `gold` scores, drawn with `gen`: `gold.size()` positions uniformly with
// replacement; for a tagger's labels (core::kSentenceEnd after each sentence) whole sentences, as many as there are,
// each with its marker, so a sentence's tags stay together.
std::vector<size_t> resample_rows(const std::vector<float>& gold, std::mt19937_64& gen);

}  // namespace hp::eval
