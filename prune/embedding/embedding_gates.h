// Hard-Concrete gates for a sentence-embedding model (`--method gates` with prune.objective: embedding): CoFi's
// gates on heads, FFN neurons and the sublayers, to a FLOPs budget, trained towards the teacher's own embeddings —
// the loss the recovery distils (train/embedding_objective.h), on the same unlabelled sentences — with CoFi's layer
// term when gates.distill_hidden > 0; then the structure fixed and fine-tuned for the recovery's steps
// (budget_recover_steps), as a classifier's budget gates are. The trainer (train/trainer.h) runs both phases with
// the objective: the checkpoint of the fixed phase kept is the one closest to the teacher on the selection pairs'
// sentences (mean cosine), the evaluation pairs never read.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/model/bert.h"
#include "core/model/head_mask.h"
#include "prune/embedding/embedding_context.h"

namespace hp::prune {

struct GatedEmbedding {
  core::Bert slim;  // the fine-tuned model slimmed by the gates' structure
  core::StructureMask keep;
  double flops_kept = 0;  // of the encoder's FLOPs at the evaluation sentences' mean length
  double seconds = 0;  // training, both phases
  nlohmann::json result;  // DIR/train_result.json: steps, the best step and its metrics, the budget
};

// The gates at `fraction` of the FLOPs, trained in `dir` (resumed from DIR/state; a finished run, DIR/
// train_result.json, is read back, not retrained). nullopt when stopped.
std::optional<GatedEmbedding> gated_embedding(const EmbedRun& r, const TeacherEmbeddings& teacher, double fraction,
                                              const std::string& dir);

}  // namespace hp::prune
