// A sentence-embedding model trained towards the teacher's own embeddings by the one trainer (train/trainer.h) with
// the embedding objective (train/embedding_objective.h) on the run's unlabelled sentences; the checkpoint kept is
// the one closest to the teacher on the selection pairs' sentences (mean cosine), the evaluation pairs never read.
// - The recovery of a searched model (prune.recover_steps, scaled as recover_scale says): distillation to the
//   teacher's embeddings, with the same-depth layer term when prune.distill_hidden > 0, in RUN_DIR/recover.
// - The gates (`--method gates` with prune.objective: embedding): CoFi's gates on heads, FFN neurons and the
//   sublayers, to a FLOPs budget, with CoFi's layer term when gates.distill_hidden > 0; then the structure fixed and
//   fine-tuned for the recovery's steps (budget_recover_steps), as a classifier's budget gates are.
// Each is resumed from DIR/state and, once finished (DIR/train_result.json), read back rather than trained again.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/model/bert.h"
#include "core/model/head_mask.h"
#include "prune/embedding/embedding_context.h"

namespace hp::prune {

// The searched model `tuned` recovered in `dir` for budget_recover_steps(p, target) steps (`target`: the fraction of
// the FLOPs kept): DIR/best. nullopt without steps or when stopped.
std::optional<core::Bert> recovered_model(const EmbedRun& r, const core::Bert& tuned, const core::PruneConfig& p,
                                          double target, const std::string& dir);

struct GatedEmbedding {
  core::Bert slim;  // the fine-tuned model slimmed by the gates' structure
  core::StructureMask keep;
  double flops_kept = 0;  // of the encoder's FLOPs at the evaluation sentences' mean length
  double seconds = 0;  // training, both phases
  nlohmann::json result;  // DIR/train_result.json: steps, the best step and its metrics, the budget
};

// The gates at `fraction` of the FLOPs, trained in `dir`. nullopt when stopped.
std::optional<GatedEmbedding> gated_embedding(const EmbedRun& r, double fraction, const std::string& dir);

}  // namespace hp::prune
