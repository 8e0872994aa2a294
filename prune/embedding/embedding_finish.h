// The end of a pruning run for embeddings (prune/embedding/embedding_run.h): the variants scored, the choice
// exported as a sentence-transformers folder and checked, timed against the teacher, summary.json.
// Internal to the embedding run's files.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base/config.h"
#include "core/model/bert.h"
#include "prune/embedding/embedding_context.h"

namespace hp::prune {

// "embedding stage N/5: what" in the log.
void log_step(int n, const std::string& what);

// Where one budget keeps its work: the scores in `state`, the recovery's run (prune/embedding/embedding_train.h) in
// `recovered`.
struct BudgetDirs {
  std::string state, recovered;
};

// The recovery's DIR/train_result.json, or null when it has none (no recovery steps).
nlohmann::json recovery_result(const BudgetDirs& dirs);

// Each of `models` (a step's name and model) scored (STATE/step-NAME.json, once) into steps[NAME] and logged; the
// name of the closest to the teacher on the selection sentences (what the model is pruned for, on held-out data; the
// Spearman of a few hundred pairs scatters by a point or two), a later one winning a tie.
std::string score_variants(const EmbedRun& r, const std::vector<std::pair<std::string, core::Bert>>& models,
                           const std::string& state, const TeacherEmbeddings& te, nlohmann::json& steps);

// RUN_DIR/model: the choice as a sentence-transformers folder, read back and checked to embed as `model` does.
nlohmann::json export_choice(const EmbedRun& r, const core::Bert& model);

// The slimmed model against the unpruned one at latency_batch x latency_seq, three alternating rounds.
nlohmann::json speed(const EmbedRun& r, const core::Bert& slim);

// A single model's end: `model` exported (RUN_DIR/model), timed against the unpruned one, summary.json with its
// scores `final` (summary["structure"] and ["budget"]["unit"] set by the caller), one line on stdout naming `what`.
void finish_one(const EmbedRun& r, const core::Bert& model, const nlohmann::json& final, const std::string& what,
                nlohmann::json& summary);

}  // namespace hp::prune
