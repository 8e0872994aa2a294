// From accumulated numbers to what a head does (analysis/DEFINITIONS.md §1–§7, §9): per-head statistics
// as [L][H] grids, Pande's t-tests with Holm and Benjamini–Hochberg over all heads × roles, Voita's
// positional and syntactic rules, Clark's syntactic accuracies and baselines, the head map (MDS), the
// no-op gradients, bootstrap stability. Torch-free; the pass that accumulates: analysis/attention_pass.h.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "analysis/head_stats.h"

namespace hp::analysis {

using Grid = std::vector<std::vector<double>>;  // [L][Hmax]; NaN = absent, masked or not applicable

struct RoleSettings {
  double tau = 3.0;  // H0: mean sieve score ≤ τ
  double alpha = 0.05;
  int min_occurrences = 100;  // relations with fewer occurrences get no syntactic heads
  double positional_share = 0.9;
  double syntactic_margin = 0.10;  // accuracy over the best baseline (Voita)
};

struct SieveTest {
  Grid mean, sd, n, t, p, holm, bh;
};

struct SyntacticHead {
  int layer = 0, head = 0;
  std::string direction;  // "dep_to_head" or "head_to_dep"
  double accuracy = 0;
};

struct RelationResult {
  long count = 0;
  std::array<Grid, 2> accuracy;  // [dir]: 0 = dep_to_head, 1 = head_to_dep
  std::array<double, kBaselineOffsets.size()> offset_accuracy{};
  int most_frequent_offset = 0;
  double most_frequent_accuracy = 0, best_baseline = 0;
  SyntacticHead best;  // the best head (either direction)
  std::vector<SyntacticHead> syntactic;  // heads ≥ best baseline + margin (when count ≥ min_occurrences)
};

// Which heads hold a role: raw p ≤ α, and after each correction (1/0, NaN for absent heads).
struct RoleFlags {
  Grid raw, holm, bh;
};

struct Analysis {
  int layers = 0, max_heads = 0;
  long examples = 0;
  RoleSettings settings;
  std::vector<uint8_t> present;  // [L·Hmax]
  std::map<std::string, Grid> stats;  // kSurfaceKeys, confidence, pos_share, pos_offset
  std::map<std::string, SieveTest> sieve;  // the tested roles that apply to this input
  std::map<std::string, RoleFlags> roles;  // tested roles + positional + syntactic_head (descriptive: raw = holm = bh)
  bool treebank = false;
  std::map<std::string, RelationResult> relations;  // kRelations + "all", treebanks only
  std::vector<double> js;  // [(L·Hmax)²]
  std::vector<std::array<double, 2>> mds;  // [L·Hmax] head map (NaN rows for absent heads)
  bool noop = false;
  std::vector<double> noop_sep_grad, noop_all_grad;  // [L]
  Grid noop_sep_grad_head, noop_all_grad_head;  // mean over examples of each example's mean |∂L/∂A|
  std::string noop_note;
  double seconds = 0;
};

// Everything of DEFINITIONS §1–§7 from one pass.
Analysis summarize(const PassResult& pass, const RoleSettings& settings);

// The tested roles' p-values of `pass` restricted to `examples` (indices, repeats allowed), corrected
// with Holm: flags[role] [L][H] (bootstrap stability, DEFINITIONS §9).
std::map<std::string, Grid> holm_roles(const PassResult& pass, const std::vector<long>& examples,
                                       const RoleSettings& s);

// Share of resamples in which each head holds each tested role (Holm), K resamples seeded by `seed`.
std::map<std::string, Grid> role_stability(const PassResult& pass, int resamples, unsigned seed, const RoleSettings& s);

// Count of heads holding `role` with flags from `grid` (1 = holds), and the heads present.
int count_role(const Grid& flags);
// |a ∧ b| / |b| over heads (NaN when b is empty): Pande's local ∧ syntactic overlap.
double overlap(const Grid& a, const Grid& b);

}  // namespace hp::analysis
