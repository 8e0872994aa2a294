// `--target-heads N` for a sentence-embedding model: stages 3-6 of the task run (prune/stages/stages.h) over the
// embedding objective (prune/objective/objective.h). Internal to the embedding run's files (embedding_run.h).
//
// 3. Each criterion of prune.criteria scores the teacher's heads with the embedding's loss or target
//    (prune/heads/criteria.h) on the first prune.rank_examples of the search's sentences — training sentences, never a
//    scored pair (RUN_DIR/state/embedding/rank_sentences.txt).
// 4. The curves, as a task's: each point's heads removed, scored on the evaluation pairs (cosine Spearman, with a
//    bootstrap band) and on the selection pairs.
// 5. The criterion: prune.method if it names one, else the one whose curve keeps the highest mean Spearman on the
//    selection pairs, random passed over beside others; exactly N heads by it (every FFN neuron kept).
// 6. prune.recover_steps of distillation to the teacher's embeddings with those heads fixed; the closer of the masked
//    and the recovered model to the teacher on the selection sentences exported.
#pragma once

#include <nlohmann/json.hpp>

#include "core/base/config.h"
#include "prune/embedding/embedding_context.h"
#include "prune/stages/summary.h"

namespace hp::prune {

// ConfigError for what the heads run does not take (a gates criterion, an unknown prune.method).
void validate_embedding_heads(const core::Config& cfg);

// The run above into `s` (embedding_summary's opening; `unpruned`: the teacher's scores). 0 when done,
// kInterruptedExit when stopped.
int run_embedding_heads(const EmbedRun& r, RunSummary& s, const nlohmann::json& unpruned);

}  // namespace hp::prune
