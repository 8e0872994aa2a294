// Which of a budget choice's models is kept, and how long a budget choice recovers: Kwon et al.'s steps —
// the search's choice, rearranged, mask-tuned — and the recovery each score on the selection slice
// (prune/data/selection.h), and the best is the candidate (the frontier's, prune/frontier/frontier_stage.h) or the export
// (--target-flops F, stage 6), so that a recovery that loses is never taken and both give the same model at F.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "prune/stages/budget.h"

namespace hp::prune {

// A budget choice's steps, in the order they are made: the search's choice, rearranged, mask-tuned, recovered.
enum class Step { kSearched, kRearranged, kTuned, kRecovered };
std::string step_name(Step s);  // "searched", "rearranged", "tuned", "recovered": as the records and summaries say
Step parse_step(const std::string& name);  // of a record this run wrote (InternalError otherwise)

// Fine-tuning steps that recover a budget choice keeping `fraction` of its unit: the budget curves' recovered line
// (`curves`: prune.curve_recover_steps, -1 = recover_steps) or stage 6 (recover_steps), scaled as
// prune.recover_scale says (removed: by the fraction removed over one half, at least a fifth; fixed: as is). 0 = no
// recovery.
int budget_recover_steps(const core::PruneConfig& p, double fraction, bool curves);

// The best on the selection slice (prune/data/selection.h) of one budget choice's steps (a recovery that loses is not
// taken): the search's choice, rearranged, tuned (the scales folded in), each slimmed, and the recovered
// model in `recovered_dir` (the best of its evaluations on the same slice; "" when there is none), evaluated at
// fp32 on the selection slice by the objective's choice_metric. Of equal ones the later step. `select_metrics`:
// variant → points.
struct BestStep {
  Step variant = Step::kTuned;
  std::map<std::string, double> select_metrics;  // step_name → points
  std::optional<core::Bert> model;  // the winner, slimmed
};
BestStep best_step(const RunContext& ctx, const BudgetSearch& s, const std::string& recovered_dir);

// The frontier's budget candidate at budget_schedule[step]: the best of `s`'s steps on the selection slice
// (best_step; the recovered one in `recovered_dir`/best when not empty), decided once, in the budget curves while
// their search is in hand. Kept in state/frontier/kwon-<step>.step.json (the variant, each step's selection metric,
// cost_s: the search's seconds plus the recovery's when it wins) and, when the winner is not the recovered model,
// in step_model_dir(ctx, step), so that measuring the candidate searches nothing again. An existing record is read.
nlohmann::json budget_step_choice(const RunContext& ctx, const BudgetSearch& s, int step, double fraction,
                                  const std::string& recovered_dir);
std::string step_choice_file(const RunContext& ctx, int step);
std::string budget_recover_dir(const RunContext& ctx, int step);  // RUN_DIR/budget_recover/<step>: its recovery
std::string step_model_dir(const RunContext& ctx, int step);  // budget_recover_dir(step)/step

// Stage 6 with a budget, after the recovery: the choice's model becomes the best of its steps on the selection
// slice (best_step at the target; the recovered one in choice.model_dir when prune.recover_steps > 0), saved into
// RUN_DIR/best_step when it is not the recovered one, so that --target-flops F exports what the frontier's budget
// candidate at F measures. step.json there records the variant and each step's selection metric.
void take_best_step(RunContext& ctx, const MaskGradients& grads, FinalChoice& choice);

}  // namespace hp::prune
