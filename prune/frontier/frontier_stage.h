// Stage 5 of the pruning run with prune.max_drop (`prune --config sst2.yaml --max-drop 1`): the compression frontier
// over what stages 3-5 stored. Every candidate — the unpruned model, the best head criterion's ranking at each count
// of prune.schedule, the budget search at each point of prune.budget_schedule (recovered as the budget curves
// recovered it, or tuned when prune.curve_recover_steps = 0) and at the budgets the run refined it at, the
// Hard-Concrete gates and the control the run trained (prune/run/pipeline.cpp) — slimmed, then at each precision
// this CPU runs natively (fp32, bf16, int8 calibrated on run.calibrate examples): evaluated on the evaluation split
// and timed at prune.latency_batch x latency_seq in alternating rounds with the unpruned fp32 model. The fastest
// candidate within max_drop points of the better of the unpruned model and the control is chosen; stages 6-9 then
// export and check it (chosen_config). Nothing is searched or trained here. Each measurement is stored in
// RUN_DIR/state/frontier/ atomically: a resumed run measures only what is missing. Writes frontier.csv and
// frontier.svg/.png.
#pragma once

#include <optional>
#include <vector>

#include "core/base/config.h"
#include "core/io/checkpoint.h"  // LoadOptions
#include "prune/frontier/measure.h"  // Candidate
#include "prune/record/frontier.h"
#include "prune/stages/stages.h"

namespace hp::prune {

// What stage 5 stored for the frontier beyond the schedules' points: the budgets (percent of the FLOPs) the search
// was refined at, in order, the gates' budgets (fractions) trained in RUN_DIR/frontier_gates, and the control.
struct FrontierPlan {
  std::vector<int> refined;
  std::vector<double> gates;
  bool control = false;
};

// The candidates of `plan` measured (or read back), without ONNX Runtime's rows or a choice: what the refinement
// and the gates' budgets read. Empty when stopped.
std::optional<Frontier> measure_candidates(const RunContext& ctx, const CurvesSummary& curves,
                                           const FrontierPlan& plan);

// The frontier of `plan`'s candidates, its choice made (chosen = -1 when no candidate is within max_drop); its files
// are appended to curves.files. Empty when stopped.
std::optional<Frontier> measure_frontier(const RunContext& ctx, CurvesSummary& curves, const FrontierPlan& plan);

// The config stages 7-9 run under after the frontier: the chosen precision, no budget of its own.
core::Config chosen_config(const core::Config& cfg, const Frontier& f);

// Before any work: each folder of prune.frontier_models holds a config.json of the same architecture and
// vocabulary as `model` (arch), no larger, and a classifier for the task's labels (`load`: the task's load options;
// a sentence-transformers folder or an export for another task is refused, not scored with a random classifier).
// InputError naming the entry and the fix.
void check_frontier_models(const core::PruneConfig& p, const core::BertConfig& arch, const std::string& model,
                           const core::LoadOptions& load);

// Where the frontier keeps its chosen candidate's model, under the run folder (choice.json names the candidate).
inline constexpr const char* kFrontierChoiceDir = "frontier_choice";

// Stages 5-6 after the frontier: the chosen candidate's model as it was measured (RUN_DIR/frontier_choice),
// slimmed already, its heads (original indices) and, for a budget candidate, its budget counted from its config:
// nothing is searched, trained or recovered again, so the export is the model measured.
FinalChoice frontier_final_choice(const RunContext& ctx, const Frontier& f);

}  // namespace hp::prune
