// `prune triggers`: Hao et al.'s adversarial triggers (AAAI 2021 §4.3, their run_adver_connection.py).
// Per mined example, the most attributed head over all layers and its two largest attribution entries
// (query i → key j) give two token-pair patterns; patterns are counted per predicted class, and the top k
// of class c are inserted into the evaluation examples whose gold label is not c. The same number of
// tokens drawn at random from the mined examples of c, at the same positions, is the baseline: an attack
// counts only where it beats it. Definition: analysis/DEFINITIONS.md §11.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/base/config.h"
#include "core/data/batching.h"
#include "core/data/glue.h"
#include "core/model/bert.h"
#include "core/text/tokenizer.h"

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

// What the stages of `prune triggers` share, resolved and read once by prepare_triggers; cli/triggers_cmd.cpp
// runs the stages in order.
struct TriggersContext {
  const core::Config* cfg = nullptr;
  const core::TaskSpec* task = nullptr;  // a classification task
  std::optional<core::Bert> model;  // model.path, fine-tuned for the task
  std::optional<core::Tokenizer> tok;
  core::EncodedDataset mined_data;  // triggers.split: the first triggers.examples rows of >= min_tokens word pieces
  core::EncodedDataset eval_data;  // triggers.eval_split, labelled
  std::string out;  // triggers.out resolved
};

// Per mined example: the two largest attribution entries of the most attributed head over all layers
// (Hao: the head holding the largest single entry), as (query, key) positions.
struct Mined {
  double value = -std::numeric_limits<double>::infinity();
  std::array<std::pair<long, long>, 2> top{};
  int predicted = 0;
};

// The patterns of each predicted class, and each class's pool of tokens for the baseline: the non-special
// tokens of its mined examples.
struct ClassPatterns {
  std::vector<std::map<std::pair<int32_t, int32_t>, long>> counts;  // [class]: pattern → mined examples
  std::vector<std::vector<int32_t>> pool;  // [class]
  long special = 0;  // patterns with [CLS], [SEP] or [PAD]: skipped
};

// Stage 1. Refuses a regression task, loads the fine-tuned model, checks both splits and reads them (the
// evaluation split before the long part, so that its errors come at once).
void prepare_triggers(TriggersContext& ctx, const core::Config& cfg);

// Stage 2. The attention attribution of every mined example (the importance criterion's own code).
std::vector<Mined> mine_attributions(const TriggersContext& ctx);

// Stage 3. The patterns per predicted class.
ClassPatterns count_patterns(const TriggersContext& ctx, const std::vector<Mined>& mined);

// Stage 4. triggers.json: per class, its top patterns inserted into the evaluation examples of the other
// classes, against the random baseline; one line per attacked class on stdout.
nlohmann::json attack(const TriggersContext& ctx, const std::vector<Mined>& mined, const ClassPatterns& patterns);

// Stage 5. Writes triggers.json into triggers.out.
void write_triggers(const TriggersContext& ctx, const nlohmann::json& j);

}  // namespace hp::analysis
