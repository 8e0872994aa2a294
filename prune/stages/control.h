// The final model's reference (prune.control): the unpruned model, and the control — the unpruned model
// trained as many steps as the final model's own training (its recovery, or its gates run) in RUN_DIR/control, with
// the recovery's config (recovery_config: distilling from the unpruned model where the recovery distils) — both
// measured on the evaluation split and the selection slice; the final model's difference is taken from the better
// of the two on the slice. The frontier's control is trained as long as its longest-trained candidate.
#pragma once

#include <optional>
#include <string>

#include "core/model/bert.h"
#include "prune/stages/stages.h"
#include "prune/stages/summary.h"

namespace hp::prune {

// The reference of `final` (the exported model, at the run's precision) made by `choice`. Its training is read from
// the train_result.json beside choice.model_dir (none when the model is the fine-tuned one itself or a step that
// trained nothing); no control without training or with prune.control off. nullopt when stopped.
std::optional<ReferenceSummary> final_reference(RunContext& ctx, const FinalChoice& choice, const core::Bert& final);

inline constexpr const char* kControlDir = "control";
// The budget curves' control (without --max-drop, whose frontier trains its own): as long as their longest recovery.
inline constexpr const char* kCurvesControlDir = "budget_control";

// The control in RUN_DIR/`sub`, trained `steps` steps as the recovery of a (`slimmed`) model trains
// (recovery_config: distilling from the unpruned model where that distils), logged under stage `stage` `name` as
// trained "as long as `as_long_as`"; kept where trained before. False when stopped.
bool train_control(const RunContext& ctx, long steps, bool slimmed, int stage, const std::string& name,
                   const std::string& as_long_as, const std::string& sub = kControlDir);

// The most optimizer steps a frontier candidate trained for: every recovery of the budget search
// (RUN_DIR/budget_recover/*) and every gates run (RUN_DIR/frontier_gates/*), read from their train_result.json.
long longest_candidate_training(const RunContext& ctx);

// r.reference — "control" where r has a control (control_steps > 0) that beat the unpruned model on the slice, else
// "unpruned" — and the final model's differences from it, given its `metric` and `select` metric (points).
void settle_reference(ReferenceSummary& r, double metric, double select);

}  // namespace hp::prune
