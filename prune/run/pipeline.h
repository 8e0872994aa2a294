// The pruning run, `prune --config X.yaml [--target-heads N] [--criteria a,b] [--out DIR]`, as named
// stages, numbered as in the README and in the log lines ("stage 4/9 curves: ..."):
//   1. prepare        config validated once; task, data, architecture and run folder resolved once (an embedding
//                     model's: prune/embedding/embedding_run.h)
//   2. fine-tune      when the model has no classifier for the task (RUN_DIR/finetune)
//   3. score          every head by each criterion and seed, on the unpruned model (RUN_DIR/state)
//   4. curves         prune along the schedule by each ranking, evaluate every point: curves.csv, plots, run.h5
//   5. choose N       exactly prune.target_heads heads: the best criterion's ranking, a named one, or gates
//   6. recover        fine-tune with those heads fixed, optionally distilling (RUN_DIR/recover)
//   7. export, verify the slimmed checkpoint in RUN_DIR/model, checked against the masked model and in HF
//   8. measure speed  the slimmed against the unpruned model at batch 1 and 32
//   9. summary        summary.json (prune/stages/summary.h) and the model card
// Stages 5-8 run only with prune.target_heads > 0 or a budget. With prune.max_drop (`--max-drop D`), stage 5 is
// the frontier: the search refined where its candidates cross D, the gates and the control trained (and the search
// refined again where the control is the better reference), then
// (prune/frontier/frontier_stage.h) every head count, budget, gates and control at every native precision measured,
// the fastest within D chosen, and stages 5-8 then run as for that head count or budget. The stages share one
// RunContext (prune/stages/stages.h).
// Every stage records its results atomically; the same command after a kill resumes.
#pragma once

#include <atomic>

#include "core/base/config.h"

namespace hp::prune {

// Checks the whole config (prune/run/validate.h), then runs the objective's stages; returns the exit code (kInterruptedExit when `stop` was set: state saved, rerun to resume).
int run_pruning(const core::Config& cfg, const std::atomic<bool>* stop);

}  // namespace hp::prune
