// Stage 5 of the pruning run with prune.max_drop (`prune --config sst2.yaml --max-drop 1`): the
// compression frontier. Every candidate — the unpruned model, the best head criterion's ranking at each count of
// prune.schedule, the budget search at each point of prune.budget_schedule (recovered as the budget curves
// recovered it, or tuned when prune.curve_recover_steps = 0) and at the budgets prune.frontier_refine adds between
// the deepest within max_drop and the next deeper one, Hard-Concrete gates at the FLOPs budgets of
// prune.frontier_gates (by default the cheapest the search left within 2·max_drop) — slimmed, then at each precision this CPU runs
// natively (fp32, bf16, int8 calibrated on run.calibrate examples): evaluated on the evaluation split and timed at
// prune.latency_batch x latency_seq in alternating rounds with the unpruned fp32 model. The fastest candidate
// within max_drop points of the unpruned fp32 model is chosen; stages 6-9 then build, export and check it as for
// --target-heads N or --target-flops F (chosen_config). Each measurement is stored in RUN_DIR/state/frontier/
// atomically: a resumed run measures only what is missing. Writes frontier.csv and frontier.svg/.png.
#pragma once

#include <optional>

#include "core/base/config.h"
#include "core/io/checkpoint.h"  // LoadOptions
#include "prune/frontier/measure.h"  // Candidate
#include "prune/record/frontier.h"
#include "prune/search/mask_search.h"
#include "prune/stages/stages.h"

namespace hp::prune {

// The frontier, its choice made (chosen = -1 when no candidate is within max_drop); its files are appended to
// curves.files. Empty when stopped.
std::optional<Frontier> measure_frontier(RunContext& ctx, CurvesSummary& curves, const MaskGradients& grads);

// The config stages 7-9 run under after the frontier: the chosen precision, no budget of its own.
core::Config chosen_config(const core::Config& cfg, const Frontier& f);

// Before any work: each folder of prune.frontier_models holds a config.json of the same architecture and
// vocabulary as `model` (arch), no larger, and a classifier for the task's labels (`load`: the task's load options;
// a sentence-transformers folder or an export for another task is refused, not scored with a random classifier).
// InputError naming the entry and the fix.
void check_frontier_models(const core::PruneConfig& p, const core::BertConfig& arch, const std::string& model,
                           const core::LoadOptions& load);

// Where the frontier trains the gates at `percent` of the FLOPs, under the run folder.
std::string frontier_gates_dir(long percent);

// Where the frontier keeps its chosen candidate's model, under the run folder (choice.json names the candidate).
inline constexpr const char* kFrontierChoiceDir = "frontier_choice";

// Stages 5-6 after the frontier: the chosen candidate's model as it was measured (RUN_DIR/frontier_choice),
// slimmed already, its heads (original indices) and, for a budget candidate, its budget counted from its config:
// nothing is searched, trained or recovered again, so the export is the model measured.
FinalChoice frontier_final_choice(const RunContext& ctx, const Frontier& f);

}  // namespace hp::prune
