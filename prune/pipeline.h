// The pruning run, `prune --config X.yaml [--target-heads N] [--criteria a,b] [--out DIR]`:
//   1. fine-tune when the model has no classifier for the task (train section; RUN_DIR/finetune),
//   2. score heads with each criterion and draw the masking curves (prune/curves.h, prune/report.h),
//   3. with prune.target_heads = N: choose N heads (best criterion's ranking, a named one, or gates in
//      target mode), recover by fine-tuning with them fixed (optionally distilling), export the slimmed
//      checkpoint to RUN_DIR/model, verify it against the masked model (and in Hugging Face when the
//      Python reference is installed), measure its speedup, and write summary.json.
// Every stage records its results atomically; the same command after a kill resumes.
#pragma once

#include <atomic>

#include "core/model/bert_config.h"
#include "core/base/config.h"

namespace hp::prune {

// Range and name checks of prune.* against the model; ConfigError naming the key and the fix.
void validate_prune_config(const core::PruneConfig& p, const core::BertConfig& arch);

// Runs the stages; returns the exit code (130 when `stop` was set: state saved, rerun to resume).
int run_pruning(const core::Config& cfg, const std::atomic<bool>* stop);

}  // namespace hp::prune
