// `prune triggers`: Hao et al.'s adversarial triggers (AAAI 2021 §4.3, their run_adver_connection.py).
// Per mined example, the most attributed head over all layers and its two largest attribution entries
// (query i → key j) give two token-pair patterns; patterns are counted per predicted class, and the top k
// of class c are inserted into the evaluation examples whose gold label is not c. The same number of
// tokens drawn at random from the mined examples of c, at the same positions, is the baseline: an attack
// counts only where it beats it. Definition: analysis/DEFINITIONS.md §11.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/base/config.h"

namespace hp::analysis {

// A token-pair pattern (word-piece ids) and how many mined examples of its class produced it.
struct Pattern {
  int32_t from = 0, to = 0;
  long count = 0;
};

// The k most frequent patterns (count descending, then ids ascending: deterministic).
std::vector<Pattern> top_patterns(std::vector<Pattern> counted, int k);

// ids with `tokens` inserted one by one, each at a uniformly drawn position strictly after [CLS] and no
// later than the first [SEP] (index first_sep of ids), so the first segment grows and the rest keeps its
// order. Returns the new ids and, through `positions`, the drawn insertion positions (for the baseline).
std::vector<int32_t> insert_tokens(const std::vector<int32_t>& ids, int first_sep, const std::vector<int32_t>& tokens,
                                   std::mt19937_64& rng, std::vector<int>* positions = nullptr);
// The same with given positions (the baseline reuses the triggers' positions).
std::vector<int32_t> insert_at(const std::vector<int32_t>& ids, const std::vector<int32_t>& tokens,
                               const std::vector<int>& positions);

int run_triggers(const core::Config& cfg);

}  // namespace hp::analysis
