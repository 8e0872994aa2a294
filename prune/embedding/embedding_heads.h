// `--target-heads N` for a sentence-embedding model, with the criteria's curves. Internal to the embedding
// run's files (prune/embedding/embedding_run.h).
//
// 1. Each criterion of prune.criteria scores the teacher's heads with the embedding's loss or target (prune/heads/criteria.h
//    says which for each) on the first prune.rank_examples of the search's sentences — training sentences, never a
//    scored pair. RUN_DIR/state/importance_CRITERION_s*_p0.h5, once.
// 2. The curves: at each point of prune.schedule the criterion's least important heads are removed (no re-scoring;
//    prune.per_layer and min_heads_per_layer as for classifiers), the teacher slimmed to the rest and scored — cosine
//    Spearman on the selection and the evaluation pairs, mean cosine to the teacher's embeddings on both.
//    RUN_DIR/curves.csv and curves.svg (the evaluation pairs' Spearman; the choice reads the selection's).
// 3. The criterion: prune.method if it names one, else ("best") the one whose curve keeps the highest mean Spearman
//    on the selection pairs, random passed over beside others. Exactly N heads by it (every FFN neuron kept), the
//    model slimmed to them, distilled to the teacher's embeddings for the steps prune.recover_steps gives at its
//    FLOPs fraction, and the closer of the two to the teacher on the selection sentences exported.
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
