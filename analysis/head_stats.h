// Per-head statistics of attention maps, accumulated one example at a time (analysis/DEFINITIONS.md
// §1–§6): Clark's surface statistics, word-level attention and syntactic accuracies, Voita's positional
// and rare-word roles, Pande's per-example sieve scores, and Clark's head distances. Torch-free: it reads
// one head's [n, n] attention map through a pointer. The forward pass that produces the maps:
// analysis/attention_pass.h. Tests and corrections on the accumulated numbers: analysis/roles.h.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace hp::analysis {

// Clark's surface statistics, in this order (DEFINITIONS §1). The order is the array layout: keep it.
inline constexpr std::array<const char*, 10> kSurfaceKeys = {
    "attn_cls",  "attn_sep",     "attn_punct",     "attn_self", "attn_prev",
    "attn_next", "attn_sep_sep", "attn_other_sep", "entropy",   "entropy_cls"};

// Roles scored per example and tested against τ (DEFINITIONS §6). Order = array layout.
enum Role : int { kLocal, kDelimiter, kCls, kSep, kBlock, kSyntactic, kRare, kNumRoles };
inline constexpr std::array<const char*, kNumRoles> kRoleNames = {"local", "delimiter", "cls", "sep",
                                                                  "block", "syntactic", "rare"};

// UD relations reported per head (DEFINITIONS §4); "all" is index kRelations.size().
inline constexpr std::array<const char*, 17> kRelations = {"nsubj",    "obj",  "iobj",      "amod",  "advmod",   "det",
                                                           "case",     "nmod", "nmod:poss", "aux",   "aux:pass", "mark",
                                                           "compound", "conj", "cc",        "ccomp", "xcomp"};
inline constexpr int kRelAll = static_cast<int>(kRelations.size());
inline constexpr int kNumRel = kRelAll + 1;
// Relation index of a DEPREL: its row in kRelations, kOtherRel (counts only in "all").
inline constexpr int kOtherRel = -1;
int relation_index(const std::string& deprel);

// Fixed-offset baselines −3..+3 without 0 (DEFINITIONS §4).
inline constexpr std::array<int, 6> kBaselineOffsets = {-3, -2, -1, 1, 2, 3};

// One encoded example as the accumulators see it. Positions are the n real tokens.
struct ExampleInfo {
  int n = 0;
  std::vector<int32_t> type_ids;  // [n]
  std::vector<uint8_t> special;  // [n] 1 at [CLS] and [SEP]
  std::vector<uint8_t> sep;  // [n] 1 at [SEP]
  std::vector<uint8_t> punct;  // [n] 1 where the token is "." or ","
  std::vector<uint8_t> rare;  // [n] 1 at the rarest non-special tokens (DEFINITIONS §5)
  bool pair = false;
  // Treebank examples: word w's pieces are [word_begin[w], word_begin[w+1]); word 0 = [CLS],
  // word m+1 = [SEP] (so m + 3 entries). heads[a-1], rel[a-1] for words a = 1..m; empty otherwise.
  std::vector<int> word_begin;
  std::vector<int> heads;  // 0 = root
  std::vector<int> rel;  // relation_index(deprel)
  bool treebank() const { return !word_begin.empty(); }
  int words() const { return static_cast<int>(word_begin.size()) - 3; }
};

// Everything accumulated for one head over the examples seen. Plain numbers: serialised for resume.
struct HeadAccumulator {
  std::array<double, kSurfaceKeys.size()> surface_sum{};  // Σ over examples of the per-example value
  std::array<long, kSurfaceKeys.size()> surface_count{};  // examples where the statistic exists
  std::vector<int64_t> offset_hist;  // argmax offset + max_len − 1
  // correct[dir][rel]: dir 0 = dependent→head, 1 = head→dependent; rel < kNumRel.
  std::array<std::array<int64_t, kNumRel>, 2> correct{};
  // Per-example sieve scores [role][example], NaN where the example lacks the role.
  std::array<std::vector<float>, kNumRoles> sieve;

  void reset(int max_len, long examples);
  // Adds example `index` from its attention map A (row-major, rows `stride` floats apart, n × n valid).
  void add(const float* a, long stride, const ExampleInfo& e, long index);
};

// Example-level counts of the treebank (the same for every head): relation occurrences, baseline hits
// per offset, and the histogram of gold offsets per relation (for the most frequent offset baseline).
struct SyntaxCounts {
  std::array<int64_t, kNumRel> occurrences{};
  std::array<std::array<int64_t, kNumRel>, kBaselineOffsets.size()> baseline_correct{};
  std::vector<std::vector<int64_t>> gold_offset_hist;  // [kNumRel][2·max_len − 1]
  void reset(int max_len);
  void add(const ExampleInfo& e);
};

// Word-level attention W [m+2, m+2] of one head (DEFINITIONS §2), row-major doubles.
std::vector<double> word_attention(const float* a, long stride, const ExampleInfo& e);

// Adds one example's Jensen–Shannon divergences between all pairs of `heads` maps (DEFINITIONS §3) to
// js (row-major [N, N], N = maps.size(), upper and lower triangle). maps[g] points at head g's [n, n] map.
void add_js_divergences(const std::vector<const float*>& maps, long stride, int n, std::vector<double>& js);

// Everything one pass over a data set accumulated (analysis/attention_pass.h fills it).
struct PassResult {
  int layers = 0, max_heads = 0;
  long examples = 0;
  std::vector<uint8_t> present;  // [L·Hmax] 1 = analysed head
  std::vector<HeadAccumulator> heads;  // [L·Hmax]
  SyntaxCounts syntax;
  std::vector<double> js;  // [(L·Hmax)²]
  std::vector<double> confidence_sum;  // [L·Hmax] Σ of row maxima
  double tokens = 0;  // real query tokens
  bool noop = false;
  std::vector<double> sep_grad_sum, all_grad_sum;  // [L·Hmax] Σ |∂L/∂A| at [SEP] keys / all keys
  std::vector<double> sep_grad_count, all_grad_count;  // [L·Hmax] entries summed
  double seconds = 0;
};

// Per-example value of one surface statistic or role is NaN when the example lacks it: never counted.
bool is_present(double v);

}  // namespace hp::analysis
