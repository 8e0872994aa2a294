// The pruning run with a FLOPs, parameter or latency budget (prune.target_flops / target_params /
// target_latency; the latency through the table of prune/search/latency_table.h): heads and
// FFN neurons chosen by Kwon et al. 2022's retraining-free search (prune/search/mask_search.h, prune/search/mask_tuning.h),
// in the stages of prune/run/pipeline.h:
//   3. score    the mask gradients on prune.search_examples of the rank split (cached in the run store)
//   4. curves   at every prune.budget_schedule point: the Fisher search, + rearrangement, + mask tuning,
//               evaluated with bootstrap bands (budget_curves.csv, budget_curves.svg), beside the head
//               criteria's curves on the same axis (FLOPs or parameters kept)
//   5. choose   the same at the target; the scales folded in and the model slimmed into RUN_DIR/search
// Recovery (stage 6) then fine-tunes that slimmed model, optionally distilling from the unpruned one.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "prune/search/mask_search.h"
#include "prune/search/latency_table.h"
#include "prune/search/mask_tuning.h"
#include "prune/stages/stages.h"

namespace hp::prune {

// The budget's unit: encoder FLOPs at the evaluation split's mean length, encoder parameters, or the whole
// model's latency at prune.latency_batch × latency_seq as the latency table predicts it.
struct BudgetUnit {
  std::string name;  // "FLOPs", "parameters" or "latency"
  UnitCosts costs;  // one head, one neuron (latency: the table's slopes)
  double total = 0;  // the unpruned model's units together
  // What no choice removes: 0 for FLOPs and parameters (their 100% is the encoder's prunable part); for
  // latency the table's fixed part and every sublayer's intercept (charged whether or not the search empties
  // the sublayer, so an emptied sublayer lands the model below its target, never above).
  double fixed = 0;
  double target = 0;  // the fraction of total + fixed to keep
  double mean_length = 0;  // tokens
  std::optional<LatencyTable> table;  // latency
  // What the units kept may cost at `fraction` of the whole.
  double budget(double fraction) const { return fraction * (total + fixed) - fixed; }
};
// The unit of ctx's run (a latency budget's from ctx.latency_table).
BudgetUnit budget_unit(RunContext& ctx);
// FLOPs or parameters (p.target_params > 0), without a context.
BudgetUnit budget_unit(const core::PruneConfig& p, const core::BertConfig& arch, double mean_length);

// Stage 1 with a latency budget, before the run folder is claimed: the latency table (RUN_DIR/latency_table.json
// while its key matches, else measured on rank 0 from model.path and shared) into ctx.latency_table, and the
// target checked against it (ConfigError with what the model takes, nothing written). Nothing without one.
void prepare_latency_budget(RunContext& ctx);
// After the claim: the table written to the run folder (unless it is there already).
void save_latency_table(const RunContext& ctx);

// True when the run has a FLOPs, parameter or latency budget, or measures the frontier (prune.max_drop: the budget
// curves in FLOPs are its candidates).
bool budget_mode(const core::PruneConfig& p);

// Stage 3 with a budget: the search sample (ctx.search) and its mask gradients. Empty when stopped.
std::optional<MaskGradients> budget_gradients(RunContext& ctx);

// Kwon et al.'s steps at one budget fraction: the choice after each step and the tuning scales.
struct BudgetSearch {
  StructureKeep searched, rearranged;
  MaskScales scales;  // of `rearranged` (0/1 without mask tuning)
  std::vector<SublayerFit> fits;
  std::map<std::string, double> seconds;  // "search", "rearrange", "tuning"
};
// The search at `fraction` of `unit` on `model`'s mask gradients, rearranged and mask-tuned on `sample` as
// prune.rearrange and prune.mask_tuning say (`cls_last_layer`: the last layer is fitted at [CLS] alone, where a
// classifier reads it); for any objective. search_at: the task run's, on its search sample.
BudgetSearch search_structure(const core::PruneConfig& P, const core::Bert& model, const RankData& sample,
                              const MaskGradients& grads, const BudgetUnit& unit, double fraction, bool cls_last_layer);
BudgetSearch search_at(const RunContext& ctx, const MaskGradients& grads, const BudgetUnit& unit, double fraction);

// The lines of the budget curves: Kwon et al.'s steps and their recovery, then the search's head and neuron counts
// filled by the Taylor importance of the same mask gradients, by weight magnitude and by random scores.
enum class BudgetLine { kSearch, kRearranged, kTuned, kRecovered, kTaylor, kMagnitude, kRandom };
// Its name in the store, budget_curves.csv and the plots: "kwon-search", …, "random-search".
const char* budget_line_name(BudgetLine line);

// Stage 4 with a budget: the budget curves (one seed: the search is deterministic given its sample) and their
// report files, appended to `curves`. `heads` are the head criteria's aggregates, drawn on the same axis.
// False when stopped.
bool budget_curves(RunContext& ctx, const MaskGradients& grads, CurvesSummary& curves);

// The budget curves' points at one budget outside the schedule (`step` past budget_schedule's indices, one per
// budget: the frontier's refinement, prune.frontier_refine), searched, recovered and stored as budget_curves stores
// the schedule's, and with prune.max_drop the frontier's candidate there decided (prune/stages/best_step.h); read back when
// stored. False when stopped.
bool budget_point_at(RunContext& ctx, const MaskGradients& grads, int step, double fraction);

// Stage 5 with a budget and prune.method = gates, after the gated run: its final model (RUN_DIR/gates/best under
// its structure, slimmed) evaluated as a curve point, with its bootstrap band, appended to the budget curves as
// method "gates"; budget_curves.csv/.svg (and pareto.svg) are written again with it.
void add_gates_point(RunContext& ctx, const FinalChoice& choice, CurvesSummary& curves);

// Stage 5 with a budget: the choice at the target, folded and slimmed into RUN_DIR/search.
FinalChoice choose_budget(RunContext& ctx, const MaskGradients& grads);

}  // namespace hp::prune
