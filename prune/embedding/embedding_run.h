// The pruning run for sentence-embedding models: `prune --config sts_embed.yaml --target-flops F` with
// prune.objective: embedding, on a sentence-transformers folder (no classifier: the model is pruned as it is used).
// The folder is read as sentence-transformers reads it (eval/embedding.h) and is its own teacher; the data are the
// sentences of data.task's train split (both sides of each pair, unlabelled, the selection rows held out), the
// selection slice (prune/data/selection.h: labelled pairs) and eval_split's pairs. Every mode then runs the task
// run's stages (prune/stages/stages.h) over a RunContext of the teacher and the embedding objective
// (prune/objective/embedding.cpp: scores, the probe the search differentiates, training towards the teacher's
// embeddings, the choice by the mean cosine to the teacher on the selection sentences):
//   --target-flops F   stage 3's mask gradients, stages 5-6: search, rearrangement, tuning, recovery, best step;
//   --method gates     stage 5's gates to F of the FLOPs (RUN_DIR/gates);
//   --target-heads N   stages 3-6: the criteria, their curves, N heads by the best, recovery;
//   --max-drop D       stage 4's budget curves and stage 5's frontier (prune/frontier/frontier_stage.h), as a
//                      task's over its budget points, with the gates and ONNX Runtime's rows of the folder.
// Stages 7-9 are every run's (prune/finish/finish.h): the choice exported as a sentence-transformers folder
// (RUN_DIR/model), read back and checked, timed against the teacher, summary.json and the card. Every finished step
// is kept: a killed run resumes with the same command.
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
