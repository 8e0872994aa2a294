// Roles, tests and corrections from accumulated numbers (see analysis/roles.h).
#include "analysis/roles.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "analysis/stats.h"

namespace hp::analysis {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Grid nan_grid(int L, int H) { return Grid(L, std::vector<double>(H, kNaN)); }

// The per-example scores of one head and role over `examples`, absent ones dropped.
std::vector<double> scores(const HeadAccumulator& h, int role, const std::vector<long>& examples) {
  std::vector<double> x;
  x.reserve(examples.size());
  for (long e : examples) {
    const float v = h.sieve[role][e];
    if (!std::isnan(v)) x.push_back(v);
  }
  return x;
}

// The roles that apply to a pass: those some present head has per-example scores for.
std::vector<int> applicable_roles(const PassResult& pass) {
  std::vector<int> roles;
  for (int r = 0; r < kNumRoles; ++r)
    for (size_t k = 0; k < pass.heads.size(); ++k)
      if (pass.present[k] && std::any_of(pass.heads[k].sieve[r].begin(), pass.heads[k].sieve[r].end(),
                                         [](float v) { return !std::isnan(v); })) {
        roles.push_back(r);
        break;
      }
  return roles;
}

std::vector<long> all_examples(long n) {
  std::vector<long> v(n);
  for (long i = 0; i < n; ++i) v[i] = i;
  return v;
}

// t-tests of every present head × applicable role over `examples`, then Holm and BH over that family.
std::map<std::string, SieveTest> test_roles(const PassResult& pass, const std::vector<long>& examples,
                                            const RoleSettings& s) {
  const int L = pass.layers, H = pass.max_heads;
  std::map<std::string, SieveTest> out;
  std::vector<double> family;
  std::vector<std::pair<std::string, int>> where;  // (role, head index) of each family member
  for (int r : applicable_roles(pass)) {
    SieveTest t{nan_grid(L, H), nan_grid(L, H), nan_grid(L, H), nan_grid(L, H),
                nan_grid(L, H), nan_grid(L, H), nan_grid(L, H)};
    for (int k = 0; k < L * H; ++k) {
      if (!pass.present[k]) continue;
      const TTest tt = ttest_greater(scores(pass.heads[k], r, examples), s.tau);
      const int l = k / H, h = k % H;
      t.mean[l][h] = tt.mean, t.sd[l][h] = tt.sd, t.n[l][h] = static_cast<double>(tt.n), t.t[l][h] = tt.t,
      t.p[l][h] = tt.p;
      family.push_back(tt.p);
      where.emplace_back(kRoleNames[r], k);
    }
    out[kRoleNames[r]] = std::move(t);
  }
  const auto holm = holm_adjust(family), bh = bh_adjust(family);
  for (size_t i = 0; i < family.size(); ++i) {
    auto& t = out[where[i].first];
    const int l = where[i].second / H, h = where[i].second % H;
    t.holm[l][h] = holm[i];
    t.bh[l][h] = bh[i];
  }
  return out;
}

Grid flags(const Grid& p, double alpha) {
  Grid f = p;
  for (auto& row : f)
    for (auto& v : row)
      if (!std::isnan(v)) v = v <= alpha ? 1.0 : 0.0;
  return f;
}

// The most frequent offset of a histogram indexed offset + max_len − 1 (ties: smaller |k|, then the
// negative one), each count divided by opportunities(k) when given.
template <class Opportunities>
std::pair<int, double> most_frequent_offset(const std::vector<int64_t>& hist, Opportunities opportunities) {
  const int max_len = static_cast<int>(hist.size() + 1) / 2;
  int best = 0;
  double best_share = -1;
  for (int d = 0; d < max_len; ++d)
    for (int k : {-d, d}) {
      const double o = opportunities(k);
      const double share = o > 0 ? hist[k + max_len - 1] / o : 0.0;
      if (share > best_share) best = k, best_share = share;
    }
  return {best, best_share};
}

void syntax_results(const PassResult& pass, const RoleSettings& s, Analysis& a) {
  const int L = pass.layers, H = pass.max_heads;
  Grid any = nan_grid(L, H);
  for (int k = 0; k < L * H; ++k)
    if (pass.present[k]) any[k / H][k % H] = 0;
  for (int rel = 0; rel < kNumRel; ++rel) {
    RelationResult rr;
    rr.count = pass.syntax.occurrences[rel];
    const std::string name = rel == kRelAll ? "all" : kRelations[rel];
    if (rr.count == 0) {  // listed with null accuracies, as every relation of the table is reported
      rr.accuracy = {nan_grid(L, H), nan_grid(L, H)};
      rr.offset_accuracy.fill(kNaN);
      rr.most_frequent_accuracy = rr.best_baseline = kNaN;
      a.relations[name] = std::move(rr);
      continue;
    }
    for (size_t o = 0; o < kBaselineOffsets.size(); ++o)
      rr.offset_accuracy[o] = static_cast<double>(pass.syntax.baseline_correct[o][rel]) / rr.count;
    const auto [offset, hits] = most_frequent_offset(pass.syntax.gold_offset_hist[rel], [](int) { return 1.0; });
    rr.most_frequent_offset = offset;
    rr.most_frequent_accuracy = hits / rr.count;
    rr.best_baseline =
        std::max(rr.most_frequent_accuracy, *std::max_element(rr.offset_accuracy.begin(), rr.offset_accuracy.end()));
    rr.best.accuracy = -1;
    for (int dir = 0; dir < 2; ++dir) {
      rr.accuracy[dir] = nan_grid(L, H);
      for (int k = 0; k < L * H; ++k) {
        if (!pass.present[k]) continue;
        const double acc = static_cast<double>(pass.heads[k].correct[dir][rel]) / rr.count;
        rr.accuracy[dir][k / H][k % H] = acc;
        const SyntacticHead sh{k / H, k % H, dir == 0 ? "dep_to_head" : "head_to_dep", acc};
        if (acc > rr.best.accuracy) rr.best = sh;
        if (rr.count >= s.min_occurrences && acc >= rr.best_baseline + s.syntactic_margin) {
          rr.syntactic.push_back(sh);
          if (rel != kRelAll) any[k / H][k % H] = 1;
        }
      }
    }
    a.relations[name] = std::move(rr);
  }
  a.roles["syntactic_head"] = {any, any, any};
}

}  // namespace

Analysis summarize(const PassResult& pass, const RoleSettings& s) {
  const int L = pass.layers, H = pass.max_heads, N = L * H;
  Analysis a;
  a.layers = L, a.max_heads = H, a.examples = pass.examples, a.settings = s, a.present = pass.present;
  a.seconds = pass.seconds;
  for (size_t q = 0; q < kSurfaceKeys.size(); ++q) {
    Grid g = nan_grid(L, H);
    for (int k = 0; k < N; ++k) {
      const auto& h = pass.heads[k];
      if (pass.present[k] && h.surface_count[q] > 0) g[k / H][k % H] = h.surface_sum[q] / h.surface_count[q];
    }
    a.stats[kSurfaceKeys[q]] = std::move(g);
  }
  Grid conf = nan_grid(L, H), share = nan_grid(L, H), offset = nan_grid(L, H), positional = nan_grid(L, H);
  for (int k = 0; k < N; ++k) {
    if (!pass.present[k]) continue;
    const int l = k / H, h = k % H;
    conf[l][h] = pass.confidence_sum[k] / std::max(pass.tokens, 1.0);
    // share(k) = argmaxes at offset k / all real queries (DEFINITIONS §5).
    const auto [off, best] = most_frequent_offset(pass.heads[k].offset_hist, [&](int) { return pass.tokens; });
    share[l][h] = pass.tokens > 0 ? best : kNaN;
    offset[l][h] = off;
    positional[l][h] = share[l][h] >= s.positional_share ? 1.0 : 0.0;
  }
  a.stats["confidence"] = conf, a.stats["pos_share"] = share, a.stats["pos_offset"] = offset;
  a.roles["positional"] = {positional, positional, positional};

  a.sieve = test_roles(pass, all_examples(pass.examples), s);
  for (const auto& [role, t] : a.sieve)
    a.roles[role] = {flags(t.p, s.alpha), flags(t.holm, s.alpha), flags(t.bh, s.alpha)};

  a.treebank = pass.syntax.occurrences[kRelAll] > 0;
  if (a.treebank) syntax_results(pass, s, a);

  // Head map over the present heads; absent heads keep NaN coordinates.
  a.js = pass.js;
  std::vector<int> idx;
  for (int k = 0; k < N; ++k)
    if (pass.present[k]) idx.push_back(k);
  Eigen::MatrixXd d(idx.size(), idx.size());
  for (size_t x = 0; x < idx.size(); ++x)
    for (size_t y = 0; y < idx.size(); ++y) d(x, y) = pass.js[static_cast<size_t>(idx[x]) * N + idx[y]];
  a.mds.assign(N, {kNaN, kNaN});
  if (idx.size() >= 3) {
    const Eigen::MatrixXd xy = classical_mds(d);
    for (size_t x = 0; x < idx.size(); ++x) a.mds[idx[x]] = {xy(x, 0), xy(x, 1)};
  }

  a.noop = pass.noop;
  if (pass.noop) {
    a.noop_sep_grad.assign(L, 0.0), a.noop_all_grad.assign(L, 0.0);
    a.noop_sep_grad_head = nan_grid(L, H);
    a.noop_all_grad_head = nan_grid(L, H);
    for (int l = 0; l < L; ++l) {
      double sep = 0, all = 0;
      int heads = 0;
      for (int h = 0; h < H; ++h) {  // per head: the mean over examples; per layer: the mean over heads
        const int k = l * H + h;
        if (!pass.present[k] || pass.sep_grad_count[k] == 0) continue;
        a.noop_sep_grad_head[l][h] = pass.sep_grad_sum[k] / pass.sep_grad_count[k];
        a.noop_all_grad_head[l][h] = pass.all_grad_sum[k] / pass.all_grad_count[k];
        sep += a.noop_sep_grad_head[l][h], all += a.noop_all_grad_head[l][h], ++heads;
      }
      a.noop_sep_grad[l] = heads > 0 ? sep / heads : kNaN;
      a.noop_all_grad[l] = heads > 0 ? all / heads : kNaN;
    }
  }
  return a;
}

std::map<std::string, Grid> holm_roles(const PassResult& pass, const std::vector<long>& examples,
                                       const RoleSettings& s) {
  std::map<std::string, Grid> out;
  for (const auto& [role, t] : test_roles(pass, examples, s)) out[role] = flags(t.holm, s.alpha);
  return out;
}

std::map<std::string, Grid> role_stability(const PassResult& pass, int resamples, unsigned seed,
                                           const RoleSettings& s) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<long> pick(0, pass.examples - 1);
  std::map<std::string, Grid> share;
  for (int k = 0; k < resamples; ++k) {
    std::vector<long> sample(pass.examples);
    for (auto& e : sample) e = pick(rng);
    for (const auto& [role, f] : holm_roles(pass, sample, s)) {
      auto& acc = share[role];
      if (acc.empty()) acc = Grid(f.size(), std::vector<double>(f[0].size(), 0.0));
      for (size_t l = 0; l < f.size(); ++l)
        for (size_t h = 0; h < f[l].size(); ++h) acc[l][h] += std::isnan(f[l][h]) ? kNaN : f[l][h] / resamples;
    }
  }
  return share;
}

int count_role(const Grid& flags) {
  int c = 0;
  for (const auto& row : flags)
    for (double v : row) c += v == 1.0;
  return c;
}

double overlap(const Grid& a, const Grid& b) {
  int both = 0, nb = 0;
  for (size_t l = 0; l < b.size(); ++l)
    for (size_t h = 0; h < b[l].size(); ++h)
      if (b[l][h] == 1.0) ++nb, both += a[l][h] == 1.0;
  return nb > 0 ? static_cast<double>(both) / nb : kNaN;
}

}  // namespace hp::analysis
