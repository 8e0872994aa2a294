// GLUE metrics. See eval/metrics.h.
#include "eval/metrics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "core/base/correlation.h"  // Pearson, Spearman: shared with analysis/stats.h
#include "core/base/errors.h"  // HP_CHECK
#include "eval/seqeval.h"

namespace hp::eval {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

enum class Kind { kClass, kScore };

// The metric table: name -> function. Task rows in core/data/glue.cpp name these.
struct MetricSpec {
  const char* name;
  Kind kind;
  double (*class_fn)(const std::vector<int>&, const std::vector<int>&);
  double (*score_fn)(const std::vector<double>&, const std::vector<double>&);
};

const MetricSpec kMetrics[] = {
    {"accuracy", Kind::kClass, &accuracy, nullptr}, {"f1", Kind::kClass, &f1_binary, nullptr},
    {"macro_f1", Kind::kClass, &f1_macro, nullptr},
    {"mcc", Kind::kClass, &matthews_corr, nullptr}, {"pearson", Kind::kScore, nullptr, &pearson},
    {"spearman", Kind::kScore, nullptr, &spearman},
};

void check_sizes(size_t a, size_t b, const char* what) {
  HP_CHECK(a == b, what << ": pred has " << a << " values, gold has " << b);
}

}  // namespace

double accuracy(const std::vector<int>& pred, const std::vector<int>& gold) {
  check_sizes(pred.size(), gold.size(), "accuracy");
  if (pred.empty()) return kNaN;
  size_t hit = 0;
  for (size_t i = 0; i < pred.size(); ++i) hit += pred[i] == gold[i];
  return static_cast<double>(hit) / static_cast<double>(pred.size());
}

double f1_binary(const std::vector<int>& pred, const std::vector<int>& gold) {
  check_sizes(pred.size(), gold.size(), "f1_binary");
  double tp = 0, fp = 0, fn = 0;
  for (size_t i = 0; i < pred.size(); ++i) {
    bool p = pred[i] == 1, g = gold[i] == 1;
    tp += p && g;
    fp += p && !g;
    fn += !p && g;
  }
  double denom = 2 * tp + fp + fn;
  return denom == 0 ? 0.0 : 2 * tp / denom;  // sklearn zero_division default -> 0
}

double f1_macro(const std::vector<int>& pred, const std::vector<int>& gold) {
  check_sizes(pred.size(), gold.size(), "f1_macro");
  std::map<int, std::array<double, 3>> count;  // class -> (tp, fp, fn)
  for (size_t i = 0; i < pred.size(); ++i) {
    if (pred[i] == gold[i]) {
      count[gold[i]][0] += 1;
    } else {
      count[pred[i]][1] += 1;
      count[gold[i]][2] += 1;
    }
  }
  if (count.empty()) return kNaN;
  double sum = 0;
  for (const auto& [k, c] : count) {
    const double denom = 2 * c[0] + c[1] + c[2];
    sum += denom == 0 ? 0.0 : 2 * c[0] / denom;
  }
  return sum / static_cast<double>(count.size());
}

double matthews_corr(const std::vector<int>& pred, const std::vector<int>& gold) {
  check_sizes(pred.size(), gold.size(), "matthews_corr");
  // Confusion-matrix form (sklearn): c = correct, s = total, t_k / p_k = gold / pred count of class k.
  std::map<int, std::pair<double, double>> count;  // class -> (t_k, p_k)
  double c = 0, s = static_cast<double>(pred.size());
  for (size_t i = 0; i < pred.size(); ++i) {
    count[gold[i]].first += 1;
    count[pred[i]].second += 1;
    c += pred[i] == gold[i];
  }
  double tp_sum = 0, pp = 0, tt = 0;
  for (const auto& kv : count) {
    tp_sum += kv.second.first * kv.second.second;
    tt += kv.second.first * kv.second.first;
    pp += kv.second.second * kv.second.second;
  }
  double cov_ytyp = c * s - tp_sum;
  double cov_ypyp = s * s - pp;
  double cov_ytyt = s * s - tt;
  double denom = cov_ytyt * cov_ypyp;
  if (denom == 0) return 0.0;  // a constant prediction or gold: sklearn returns 0
  return cov_ytyp / std::sqrt(denom);
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  check_sizes(x.size(), y.size(), "pearson");
  return core::pearson(x, y);
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  check_sizes(x.size(), y.size(), "spearman");
  return core::spearman(x, y, core::NanPolicy::kPropagate);
}

namespace {

const char* const kEntityMetrics[] = {"entity_f1", "entity_precision", "entity_recall"};

// A tagger's metrics: its tags split into sentences at the markers, accuracy over them, seqeval's entity scores.
std::map<std::string, double> tag_metrics(const core::TaskSpec& task, const std::vector<float>& pred,
                                          const std::vector<float>& gold) {
  const auto name = [&](float v) {
    const long i = std::lround(v);
    return i >= 0 && i < static_cast<long>(task.labels.size()) ? task.labels[static_cast<size_t>(i)] : std::string();
  };
  std::vector<std::vector<std::string>> g(1), p(1);
  std::vector<int> gi, pi;
  for (size_t i = 0; i < gold.size(); ++i) {
    if (gold[i] == core::kSentenceEnd) {
      g.emplace_back(), p.emplace_back();
      continue;
    }
    gi.push_back(static_cast<int>(std::lround(gold[i]))), pi.push_back(static_cast<int>(std::lround(pred[i])));
    g.back().push_back(name(gold[i])), p.back().push_back(name(pred[i]));
  }
  std::map<std::string, double> out;
  for (const std::string& metric : task.metrics) {
    if (metric == "accuracy") {
      out[metric] = accuracy(pi, gi);
      continue;
    }
    HP_CHECK(std::find(std::begin(kEntityMetrics), std::end(kEntityMetrics), metric) != std::end(kEntityMetrics),
             "task " << task.name << " names metric '" << metric << "', which a tagger has not");
    const EntityScores e = entity_scores(g, p);
    out[metric] = metric == "entity_f1" ? e.f1 : metric == "entity_precision" ? e.precision : e.recall;
  }
  return out;
}

}  // namespace

std::map<std::string, double> compute_metrics(const core::TaskSpec& task, const std::vector<float>& pred,
                                              const std::vector<float>& gold) {
  check_sizes(pred.size(), gold.size(), "compute_metrics");
  if (task.head == core::Head::kToken) return tag_metrics(task, pred, gold);
  std::vector<int> pi, gi;
  std::vector<double> pd(pred.begin(), pred.end()), gd(gold.begin(), gold.end());
  for (size_t i = 0; i < pred.size(); ++i) {
    pi.push_back(static_cast<int>(std::lround(pred[i])));
    gi.push_back(static_cast<int>(std::lround(gold[i])));
  }
  std::map<std::string, double> out;
  for (const std::string& name : task.metrics) {
    const MetricSpec* spec = nullptr;
    for (const auto& m : kMetrics)
      if (name == m.name) spec = &m;
    HP_CHECK(spec != nullptr, "task " << task.name << " names unknown metric '" << name << "'");
    out[name] = spec->kind == Kind::kClass ? spec->class_fn(pi, gi) : spec->score_fn(pd, gd);
  }
  return out;
}

PairedDelta paired_bootstrap(const core::TaskSpec& task, const std::string& metric, const std::vector<float>& a,
                             const std::vector<float>& b, const std::vector<float>& gold, int resamples, double level,
                             unsigned long long seed) {
  const RowMetric m = [&](const std::vector<float>& p, const std::vector<float>& g) {
    return compute_metrics(task, p, g).at(metric);
  };
  return paired_bootstrap(m, a, b, gold, resamples, level, seed);
}

PairedDelta paired_bootstrap(const RowMetric& metric, const std::vector<float>& a, const std::vector<float>& b,
                             const std::vector<float>& gold, int resamples, double level, unsigned long long seed) {
  check_sizes(a.size(), gold.size(), "paired_bootstrap");
  check_sizes(b.size(), gold.size(), "paired_bootstrap");
  auto delta = [&](const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& g) {
    return metric(x, g) - metric(y, g);
  };
  PairedDelta d;
  d.delta = d.lo = d.hi = delta(a, b, gold);
  const size_t n = gold.size();
  if (resamples <= 0 || n < 2) return d;
  std::mt19937_64 gen(seed);
  std::vector<float> ra, rb, rg;
  std::vector<double> stats;
  for (int r = 0; r < resamples; ++r) {
    const auto idx = resample_rows(gold, gen);
    ra.resize(idx.size()), rb.resize(idx.size()), rg.resize(idx.size());
    for (size_t k = 0; k < idx.size(); ++k) {
      const size_t i = idx[k];
      ra[k] = a[i], rb[k] = b[i], rg[k] = gold[i];
    }
    const double v = delta(ra, rb, rg);
    if (std::isfinite(v)) stats.push_back(v);
  }
  if (stats.empty()) return d;
  std::sort(stats.begin(), stats.end());
  auto quantile = [&](double q) {  // linear between order statistics (numpy's default)
    const double at = q * static_cast<double>(stats.size() - 1);
    const size_t i = static_cast<size_t>(std::floor(at));
    const size_t j = std::min(i + 1, stats.size() - 1);
    return stats[i] + (at - static_cast<double>(i)) * (stats[j] - stats[i]);
  };
  d.lo = quantile((1 - level) / 2), d.hi = quantile((1 + level) / 2);
  return d;
}

std::vector<std::string> metric_names() {
  std::vector<std::string> out;
  for (const auto& m : kMetrics) out.push_back(m.name);
  out.insert(out.end(), std::begin(kEntityMetrics), std::end(kEntityMetrics));
  return out;
}

std::vector<size_t> resample_rows(const std::vector<float>& gold, std::mt19937_64& gen) {
  const size_t n = gold.size();
  std::vector<size_t> ends;  // a tagger's sentence ends (the markers' positions)
  for (size_t i = 0; i < n; ++i)
    if (gold[i] == core::kSentenceEnd) ends.push_back(i);
  std::vector<size_t> idx;
  if (ends.empty()) {
    std::uniform_int_distribution<size_t> pick(0, n - 1);
    idx.resize(n);
    for (auto& i : idx) i = pick(gen);
    return idx;
  }
  std::uniform_int_distribution<size_t> pick(0, ends.size() - 1);
  for (size_t s = 0; s < ends.size(); ++s) {
    const size_t k = pick(gen), begin = k == 0 ? 0 : ends[k - 1] + 1;
    for (size_t i = begin; i <= ends[k]; ++i) idx.push_back(i);
  }
  return idx;
}

}  // namespace hp::eval
