// prune analyze: hand-computed heads, and every statistic against the independent Python reference
// (tests/golden/make_analysis_goldens.py: HF attentions in float64, numpy, scipy, statsmodels).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/attention_pass.h"
#include "analysis/examples.h"
#include "analysis/outputs.h"
#include "analysis/roles.h"
#include "core/io/checkpoint.h"
#include "core/base/files.h"

using namespace hp;
using analysis::ExampleInfo;

namespace {

// A single-sentence example of n tokens: [CLS] x … x [SEP], nothing rare.
ExampleInfo plain_example(int n) {
  ExampleInfo e;
  e.n = n;
  e.type_ids.assign(n, 0);
  e.special.assign(n, 0), e.sep.assign(n, 0), e.punct.assign(n, 0), e.rare.assign(n, 0);
  e.special[0] = e.special[n - 1] = 1;
  e.sep[n - 1] = 1;
  e.rare[1] = 1;
  return e;
}

// One head, one layer, the given maps (all of length n): a PassResult as the pass would fill it.
analysis::PassResult one_head_pass(const std::vector<std::vector<float>>& maps, const ExampleInfo& e) {
  analysis::PassResult r;
  r.layers = 1, r.max_heads = 1, r.examples = static_cast<long>(maps.size());
  r.present = {1};
  r.heads.resize(1);
  r.heads[0].reset(16, r.examples);
  r.syntax.reset(16);
  r.js.assign(1, 0.0);
  r.confidence_sum.assign(1, 0.0);
  for (size_t x = 0; x < maps.size(); ++x) {
    r.heads[0].add(maps[x].data(), e.n, e, static_cast<long>(x));
    r.tokens += e.n;
  }
  return r;
}

}  // namespace

TEST_CASE("analysis: a previous-token head scores 1 on prev and is positional at offset -1", "[analysis]") {
  const int n = 12;
  std::vector<float> a(n * n, 0.f);
  a[0] = 1.f;  // [CLS] attends to itself: it has no previous token
  for (int i = 1; i < n; ++i) a[i * n + i - 1] = 1.f;
  const auto e = plain_example(n);
  auto s = analysis::summarize(one_head_pass({a, a, a}, e), {});
  CHECK(s.stats.at("attn_prev")[0][0] == Approx(1.0).epsilon(1e-12));
  CHECK(s.stats.at("attn_next")[0][0] == Approx(0.0).margin(1e-12));
  CHECK(s.stats.at("attn_self")[0][0] == Approx(1.0 / n).epsilon(1e-12));
  CHECK(s.stats.at("attn_cls")[0][0] == Approx(2.0 / n).epsilon(1e-12));  // rows 0 and 1 attend to [CLS]
  CHECK(s.stats.at("pos_share")[0][0] == Approx((n - 1.0) / n).epsilon(1e-12));  // the [CLS] row: offset 0
  CHECK(s.stats.at("pos_offset")[0][0] == -1);
  CHECK(s.roles.at("positional").raw[0][0] == 1.0);
  // Local sieve: every query puts all its mass inside the band; r_i = n / |band_i|, a known mean.
  double local = 0;
  for (int i = 0; i < n; ++i) local += static_cast<double>(n) / (std::min(i + 2, n - 1) - std::max(i - 2, 0) + 1);
  CHECK(s.sieve.at("local").mean[0][0] == Approx(local / n).epsilon(1e-6));
}

TEST_CASE("analysis: a uniform head has entropy ln n, sieve scores 1 and no role", "[analysis]") {
  const int n = 9;
  std::vector<float> a(n * n, 1.f / n);
  auto s = analysis::summarize(one_head_pass({a, a, a, a}, plain_example(n)), {});
  CHECK(s.stats.at("entropy")[0][0] == Approx(std::log(n)).epsilon(1e-6));
  CHECK(s.stats.at("entropy_cls")[0][0] == Approx(std::log(n)).epsilon(1e-6));
  for (const char* role : {"local", "delimiter", "cls", "sep"}) {
    CHECK(s.sieve.at(role).mean[0][0] == Approx(1.0).epsilon(1e-6));
    CHECK(std::isnan(s.sieve.at(role).p[0][0]));  // identical scores: sd = 0, not tested
  }
  CHECK(s.stats.at("attn_sep_sep")[0][0] == Approx(1.0 / n).epsilon(1e-6));
}

TEST_CASE("analysis: word-level attention sums over a word's pieces as target and averages as source", "[analysis]") {
  // [CLS] w1 w2a w2b [SEP]: word 2 has two pieces.
  ExampleInfo e = plain_example(5);
  e.word_begin = {0, 1, 2, 4, 5};
  e.heads = {2, 0};
  e.rel = {analysis::relation_index("nsubj"), analysis::kOtherRel};
  const std::vector<float> a = {0.2f, 0.2f, 0.2f, 0.2f, 0.2f,  //
                                0.1f, 0.1f, 0.3f, 0.4f, 0.1f,  //
                                0.0f, 0.5f, 0.1f, 0.2f, 0.2f,  //
                                0.1f, 0.1f, 0.6f, 0.0f, 0.2f,  //
                                0.2f, 0.2f, 0.2f, 0.2f, 0.2f};
  const auto w = analysis::word_attention(a.data(), 5, e);
  REQUIRE(w.size() == 16);
  CHECK(w[1 * 4 + 2] == Approx(0.7));  // w1 -> w2: 0.3 + 0.4
  CHECK(w[2 * 4 + 1] == Approx((0.5 + 0.1) / 2));  // w2 -> w1: mean over its two pieces
  CHECK(w[2 * 4 + 2] == Approx((0.3 + 0.6) / 2));
  for (int x = 0; x < 4; ++x) {
    double row = 0;
    for (int y = 0; y < 4; ++y) row += w[x * 4 + y];
    CHECK(row == Approx(1.0));
  }
  // w1's head is w2 (nsubj): dependent→head argmax of w1's row (diagonal and specials excluded) is w2.
  analysis::HeadAccumulator h;
  h.reset(8, 1);
  h.add(a.data(), 5, e, 0);
  CHECK(h.correct[0][analysis::relation_index("nsubj")] == 1);
  CHECK(h.correct[0][analysis::kRelAll] == 1);
}
