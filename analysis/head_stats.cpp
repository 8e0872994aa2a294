// Per-head accumulators over attention maps: the formulas of analysis/DEFINITIONS.md §1–§6.
#include "analysis/head_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/kernels/entropy.h"

namespace hp::analysis {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Index of the first maximum of row[0..n).
int argmax(const float* row, int n) {
  int best = 0;
  for (int j = 1; j < n; ++j)
    if (row[j] > row[best]) best = j;
  return best;
}

// Clark's smoothed row entropy (DEFINITIONS §1): Ã = 0.9999 A + 0.0001 / n.
double smoothed_entropy(const float* row, int n) {
  double h = 0;
  for (int j = 0; j < n; ++j) {
    const double p = 0.9999 * row[j] + 0.0001 / n;
    h -= p * std::log(p);
  }
  return h;
}

// Pande's row entropy: unsmoothed, 0 ln 0 = 0 (scipy.stats.entropy of a row summing to 1).
double raw_entropy(const float* row, int n) {
  double h = 0;
  for (int j = 0; j < n; ++j)
    if (row[j] > 0) h -= static_cast<double>(row[j]) * std::log(static_cast<double>(row[j]));
  return h;
}

// The surface statistics of one example, in kSurfaceKeys order (NaN where absent).
std::array<double, kSurfaceKeys.size()> surface(const float* a, long stride, const ExampleInfo& e) {
  const int n = e.n;
  double cls = 0, sep = 0, punct = 0, self = 0, prev = 0, next = 0, sep_sep = 0, other_sep = 0, ent = 0;
  int n_sep = 0;
  for (int i = 0; i < n; ++i) {
    const float* row = a + i * stride;
    double to_sep = 0;
    for (int j = 0; j < n; ++j) {
      if (e.sep[j]) to_sep += row[j];
      if (e.punct[j]) punct += row[j];
    }
    cls += row[0];
    sep += to_sep;
    self += row[i];
    if (i >= 1) prev += row[i - 1];
    if (i + 1 < n) next += row[i + 1];
    if (e.sep[i]) sep_sep += to_sep, ++n_sep;
    else other_sep += to_sep;
    ent += smoothed_entropy(row, n);
  }
  // prev/next over the n − 1 queries that have such a neighbour (DEFINITIONS §1; Clark divides by n).
  return {cls / n,
          sep / n,
          punct / n,
          self / n,
          n > 1 ? prev / (n - 1) : kNaN,
          n > 1 ? next / (n - 1) : kNaN,
          n_sep > 0 ? sep_sep / n_sep : kNaN,
          n > n_sep ? other_sep / (n - n_sep) : kNaN,
          ent / n,
          smoothed_entropy(a, n)};
}

// Mean over queries with a non-empty role set of n · mean_{j∈S_i} A[i,j] (× the row entropy for block).
template <class InSet>
double sieve_score(const float* a, long stride, int n, InSet in_set, bool entropy_weighted) {
  double sum = 0;
  int queries = 0;
  for (int i = 0; i < n; ++i) {
    const float* row = a + i * stride;
    double mass = 0;
    int size = 0;
    for (int j = 0; j < n; ++j)
      if (in_set(i, j)) mass += row[j], ++size;
    if (size == 0) continue;
    double r = n * mass / size;
    if (entropy_weighted) r *= raw_entropy(row, n);
    sum += r;
    ++queries;
  }
  return queries > 0 ? sum / queries : kNaN;
}

}  // namespace

int relation_index(const std::string& deprel) {
  for (size_t r = 0; r < kRelations.size(); ++r)
    if (deprel == kRelations[r]) return static_cast<int>(r);
  return kOtherRel;
}

bool is_present(double v) { return !std::isnan(v); }

void HeadAccumulator::reset(int max_len, long examples) {
  surface_sum.fill(0);
  surface_count.fill(0);
  offset_hist.assign(2 * max_len - 1, 0);
  for (auto& c : correct) c.fill(0);
  for (auto& s : sieve) s.assign(examples, std::numeric_limits<float>::quiet_NaN());
}

std::vector<double> word_attention(const float* a, long stride, const ExampleInfo& e) {
  const int words = static_cast<int>(e.word_begin.size()) - 1;  // m + 2
  std::vector<double> w(static_cast<size_t>(words) * words, 0.0);
  for (int x = 0; x < words; ++x) {
    const int b0 = e.word_begin[x], b1 = e.word_begin[x + 1];
    for (int i = b0; i < b1; ++i)
      for (int y = 0; y < words; ++y)
        for (int j = e.word_begin[y]; j < e.word_begin[y + 1]; ++j) w[x * words + y] += a[i * stride + j];
    for (int y = 0; y < words; ++y) w[x * words + y] /= (b1 - b0);  // "from" a word: mean over its pieces
  }
  return w;
}

void HeadAccumulator::add(const float* a, long stride, const ExampleInfo& e, long index) {
  const int n = e.n;
  const auto s = surface(a, stride, e);
  for (size_t k = 0; k < s.size(); ++k)
    if (is_present(s[k])) surface_sum[k] += s[k], ++surface_count[k];

  // Argmax offsets (positional) and hits on the rarest tokens (rare-word).
  const int max_len = static_cast<int>(offset_hist.size() + 1) / 2;
  int rare_hits = 0, rare_size = 0;
  for (int j = 0; j < n; ++j) rare_size += e.rare[j];
  for (int i = 0; i < n; ++i) {
    const int j = argmax(a + i * stride, n);
    ++offset_hist[j - i + max_len - 1];
    rare_hits += e.rare[j];
  }

  auto put = [&](Role r, double v) { sieve[r][index] = static_cast<float>(v); };
  put(kLocal, sieve_score(
                  a, stride, n, [](int i, int j) { return std::abs(i - j) <= 2; }, false));
  put(kDelimiter, sieve_score(
                      a, stride, n, [&](int, int j) { return j == 0 || e.sep[j]; }, false));
  put(kCls, sieve_score(
                a, stride, n, [](int, int j) { return j == 0; }, false));
  put(kSep, sieve_score(
                a, stride, n, [&](int, int j) { return e.sep[j] != 0; }, false));
  if (e.pair)
    put(kBlock, sieve_score(
                    a, stride, n, [&](int i, int j) { return !e.special[j] && e.type_ids[j] == e.type_ids[i]; }, true));
  if (rare_size > 0) put(kRare, static_cast<double>(rare_hits) / rare_size);

  if (!e.treebank()) return;
  const int m = e.words(), words = m + 2;
  const auto w = word_attention(a, stride, e);
  auto W = [&](int x, int y) { return x == y ? 0.0 : w[x * words + y]; };  // diagonal excluded
  double arc_sum = 0;
  int arcs = 0;
  for (int x = 1; x <= m; ++x) {
    const int gold = e.heads[x - 1];
    if (gold == 0) continue;
    int to = 1, from = 1;  // first maxima over words 1..m
    for (int y = 2; y <= m; ++y) {
      if (W(x, y) > W(x, to)) to = y;
      if (W(y, x) > W(from, x)) from = y;
    }
    const int rel = e.rel[x - 1];
    for (int dir = 0; dir < 2; ++dir) {
      if ((dir == 0 ? to : from) != gold) continue;
      ++correct[dir][kRelAll];
      if (rel != kOtherRel) ++correct[dir][rel];
    }
    auto pieces = [&](int v) { return e.word_begin[v + 1] - e.word_begin[v]; };
    arc_sum += 0.5 * (w[x * words + gold] / (static_cast<double>(pieces(gold)) / n) +
                      w[gold * words + x] / (static_cast<double>(pieces(x)) / n));
    ++arcs;
  }
  if (arcs > 0) put(kSyntactic, arc_sum / arcs);
}

void SyntaxCounts::reset(int max_len) {
  occurrences.fill(0);
  for (auto& b : baseline_correct) b.fill(0);
  gold_offset_hist.assign(kNumRel, std::vector<int64_t>(2 * max_len - 1, 0));
}

void SyntaxCounts::add(const ExampleInfo& e) {
  const int m = e.words();
  const int max_len = static_cast<int>(gold_offset_hist[0].size() + 1) / 2;
  for (int x = 1; x <= m; ++x) {
    const int gold = e.heads[x - 1];
    if (gold == 0) continue;
    for (int rel : {kRelAll, e.rel[x - 1]}) {
      if (rel == kOtherRel) continue;
      ++occurrences[rel];
      ++gold_offset_hist[rel][gold - x + max_len - 1];
      for (size_t k = 0; k < kBaselineOffsets.size(); ++k)
        if (std::clamp(x + kBaselineOffsets[k], 0, m) == gold) ++baseline_correct[k][rel];
    }
  }
}

void add_js_divergences(const std::vector<const float*>& maps, long stride, int n, std::vector<double>& js) {
  const long N = static_cast<long>(maps.size()), len = (static_cast<long>(n) * n + 15) / 16 * 16;
  // Smoothed copies P = 0.001/n + 0.999 A, contiguous, padded with 1 to a multiple of 16 floats (1 ln 1 = 0),
  // and Σ P ln P per head. JS = ½ΣPlnP + ½ΣQlnQ − ΣMlnM.
  std::vector<float> p(static_cast<size_t>(N) * len, 1.0f);
  std::vector<double> plogp(N, 0.0);
  const core::SumMLogM sum_m_log_m = core::sum_m_log_m_kernel();
#pragma omp parallel for schedule(static)
  for (long g = 0; g < N; ++g) {
    float* dst = p.data() + g * len;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) dst[i * n + j] = 0.001f / n + 0.999f * maps[g][i * stride + j];
    plogp[g] = sum_m_log_m(dst, dst, len);  // m = (p + p) / 2 = p
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (long g = 0; g < N; ++g) {
    for (long h = g + 1; h < N; ++h) {
      const float* a = p.data() + g * len;
      const float* b = p.data() + h * len;
      const double mlogm = sum_m_log_m(a, b, len);
      const double d = 0.5 * (plogp[g] + plogp[h]) - mlogm;
      js[g * N + h] += d;
      js[h * N + g] += d;
    }
  }
}

}  // namespace hp::analysis
