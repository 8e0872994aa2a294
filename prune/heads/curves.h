// Iterative masking curves: for one criterion and seed, prune along the schedule (re-scoring after
// every step when prune.iterative), evaluate each point with the heads physically removed, and record
// metrics, parameters, FLOPs and speed. Every finished score and point is written atomically under
// RUN_DIR/state/ (prune/record/run_store.h) and read back on restart, so a killed run resumes where it was.
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "core/data/batching.h"
#include "core/model/bert.h"
#include "core/base/config.h"
#include "core/model/head_mask.h"
#include "eval/evaluator.h"
#include "prune/heads/criteria.h"
#include "prune/objective/objective.h"
#include "prune/record/run_store.h"
#include "prune/heads/schedule.h"  // Matrix

namespace hp::prune {

// An importance [L, H] as the rankings read it.
Matrix to_matrix(const torch::Tensor& importance);

struct CurveInputs {
  const core::Bert* model = nullptr;  // fine-tuned, unpruned
  // The same on run.device (a GPU), where the criteria score and the curves' points are evaluated (null: `model`,
  // on the CPU).
  const core::Bert* score_model = nullptr;
  // The unpruned model where the work is done: on run.device when that is a GPU, else `model`.
  const core::Bert& working_model() const { return score_model ? *score_model : *model; }
  const Objective* objective = nullptr;  // scores each point (its evaluation split) and what the criteria read
  bool select_too = false;  // each point also scored on the selection slice, its metrics named select_<metric>
  const core::PruneConfig* opts = nullptr;
  std::vector<int> counts;  // heads pruned at each point (schedule_counts)
  long latency_batch = 32, latency_seq = 64;  // shape of the latency measurement
  core::Precision precision = core::Precision::kFp32;  // of every point's evaluation and latency (run.precision)
  const std::atomic<bool>* stop = nullptr;  // set (Ctrl-C): return after the current point
};

// The criterion's importance [L, H] of the unpruned model for `seed`: scored once, then read from the
// store (the curves and the exact-N mask of a non-iterative run start from it).
torch::Tensor score_unpruned(const CurveInputs& in, const Criterion& crit, int seed, const RankData& rank,
                             RunStore& store);

// `model` (a CPU model at its precision; `masks` on it) scored by in.objective on `split`: on run.device when that is a GPU (in.score_model
// set) and the model runs at fp32 — bf16 and int8 are the CPU's kernels (core/kernels) and evaluate here, as `prune
// eval` does —, else on the CPU. The unpruned model itself is evaluated as its GPU copy, anything else copied there
// first. The curves' points, the search's steps, its step choice and the layer choice are evaluated this way; timing
// stays on the CPU.
eval::EvalResult evaluate_on(const CurveInputs& in, const core::Bert& model, Split split,
                             const eval::Masks& masks = {});

// One point of a curve: `model` (the curve's, or one with tuning scales folded in) slimmed to the heads `keep`
// and the FFN neurons `neurons` (empty = all), evaluated on the evaluation split (and the selection slice with
// in.select_too); FLOPs at its mean length.
CurvePoint evaluate_point(const CurveInputs& in, const core::Bert& model, const std::string& criterion, int seed,
                          int step, const core::HeadSet& keep, const core::NeuronSet& neurons = {});
// The same for a whole structure (its layers and hidden channels removed too).
CurvePoint evaluate_point(const CurveInputs& in, const core::Bert& model, const std::string& criterion, int seed,
                          int step, const core::StructureMask& keep);


// One criterion's curve for one seed; `rank` is that seed's ranking data. Stops early (fewer points)
// when in.stop is set.
std::vector<CurvePoint> run_curve(const CurveInputs& in, const Criterion& crit, int seed, const RankData& rank,
                                  RunStore& store);

// The mask reached after pruning `n_pruned` heads by `crit` (same path as the curve: the scores of
// earlier schedule points are reused when iterative).
core::HeadSet mask_for_count(const CurveInputs& in, const Criterion& crit, int seed, const RankData& rank,
                             RunStore& store, int n_pruned);

// Mean over seeds and bootstrap 95% interval over evaluation examples of each point's primary metric.
struct Aggregate {
  std::string criterion;
  int pruned = 0, kept = 0;
  double mean = 0, lo = 0, hi = 0;  // primary metric
  std::map<std::string, double> metrics;  // every metric, mean over seeds
  long params = 0;
  double flops = 0, eval_examples_per_s = 0, latency_ms = 0;
  int seeds = 0;
};

// The bootstrap resamples the evaluation split's rows (objective.gold, objective.metric_of).
std::vector<Aggregate> aggregate(const std::vector<CurvePoint>& points, const Objective& objective, int bootstrap,
                                 int seed);

}  // namespace hp::prune
