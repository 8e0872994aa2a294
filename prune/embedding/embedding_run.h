// The pruning run for sentence-embedding models: `prune --config sts_embed.yaml --target-flops F` with
// prune.objective: embedding, on a sentence-transformers folder (no classifier: the model is pruned as it is used).
//
//   1. The folder read as sentence-transformers reads it (eval/embedding.h); the unpruned model is the teacher.
//      Data: the sentences of data.task's train split (both sides of each pair, unlabelled, the selection rows
//      held out), the selection slice (prune/data/selection.h: train[-N:], labelled pairs) and eval_split (pairs).
//   2. Mask gradients of the embedding probe (train/embedding_objective.h) on prune.search_examples sentences.
//   3. Kwon et al.'s search, rearrangement and mask tuning at the budget, as for classifiers (prune/search/mask_search.h,
//      prune/search/mask_tuning.h; the last layer fitted at every position the pooling reads).
//   4. Four models — searched, rearranged, tuned, recovered (prune.recover_steps scaled as recover_scale says, of
//      distillation to the teacher's embeddings by the trainer, in RUN_DIR/recover) — each scored on the selection pairs' sentences by the mean cosine
//      of its embeddings to the teacher's: the closest is the choice (a recovery that loses is not taken; the
//      cosine Spearman of a few hundred pairs, also recorded, scatters by a point or two). eval_split's cosine
//      Spearman and mean cosine to the teacher are reported for all four.
//   5. The choice exported as a sentence-transformers folder (RUN_DIR/model), read back and checked to embed as the
//      model in memory did; timed against the unpruned model; summary.json.
// `--method gates --target-flops F` replaces 2-4 with CoFi's gates towards the teacher's embeddings
// (stage 5 of the task run through the embedding objective), trained in RUN_DIR/gates.
// Every finished step is kept (the gradients and each score in RUN_DIR/state, the recovery in RUN_DIR/recover): a killed run
// resumes with the same command.
#pragma once

#include <atomic>

#include "core/base/config.h"

namespace hp::prune {

// ConfigError, before anything is written, for what the embedding objective does not do (yet): another task than
// STS-B for evaluation, no --target-flops/--target-params, --max-drop, --target-heads/--target-layers/
// --target-latency, the gates without --target-flops, hidden channels or layers in prune.structures, a folder that
// is no sentence-transformers model, more than one process.
void validate_embedding_run(const core::Config& cfg);

// The run of a config validate_run passed; 0 when done, kInterruptedExit when stopped (finished work kept).
int run_embedding_pruning(const core::Config& cfg, const std::atomic<bool>* stop);

}  // namespace hp::prune
