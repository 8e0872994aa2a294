// The pruning run for sentence-embedding models: `prune --config sts_embed.yaml --target-flops F` with
// prune.objective: embedding, on a sentence-transformers folder (no classifier: the model is pruned as it is used).
// The folder is read as sentence-transformers reads it (eval/embedding.h) and is its own teacher; the data are the
// sentences of data.task's train split (both sides of each pair, unlabelled, the selection rows held out), the
// selection slice (prune/data/selection.h: labelled pairs) and eval_split's pairs. Stage 1 here makes the stages'
// RunContext of the teacher and the embedding objective (prune/objective/embedding.cpp: scores, the probe the search
// differentiates, training towards the teacher's embeddings, the choice by the mean cosine to the teacher on the
// selection sentences); prune/run/pipeline.cpp then runs the stages each mode needs, as a task run's.
#pragma once

#include <atomic>

#include "core/base/config.h"
#include "prune/embedding/embedding_context.h"
#include "prune/stages/stages.h"

namespace hp::prune {

// ConfigError, before anything is written, for what the embedding objective does not do (yet): another task than
// STS-B for evaluation, no --target-flops/--target-params, --max-drop, --target-heads/--target-layers/
// --target-latency, the gates without --target-flops, hidden channels or layers in prune.structures, a folder that
// is no sentence-transformers model, more than one process.
void validate_embedding_run(const core::Config& cfg);

// Stage 1 of a config validate_run passed: the teacher and the data read into `r` (nothing written when they fail),
// the run folder claimed, and `ctx` made over them.
void prepare_embedding(EmbedRun& r, RunContext& ctx, const core::Config& cfg, const std::atomic<bool>* stop);

}  // namespace hp::prune
