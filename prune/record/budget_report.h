// The budget curves as data (summary.json's "budget_curves", written by prune/stages/budget.h's stage 4) and what is
// drawn from them, in the run folder and in `prune report` alike: budget_curves.csv, the metric against the
// budget's unit kept (budget_curves.svg), and the metric against the measured speedup (pareto.svg). Torch-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/plot/plot.h"

namespace hp::prune {

// One point of one method's curve. kept_fraction: of the budget's unit (FLOPs or parameters: the encoder's;
// latency: measured, over the unpruned model's).
struct BudgetCurvePoint {
  std::string method;  // "kwon-search", ..., "random-search", or "heads only: CRITERION"
  double kept_fraction = 0;
  int heads_kept = 0;
  long params = 0;
  double flops = 0, mean = 0, ci_lo = 0, ci_hi = 0;
  double latency_ms = 0;  // at latency_batch; 0 when not measured
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BudgetCurvePoint, method, kept_fraction, heads_kept, params, flops, mean, ci_lo,
                                   ci_hi, latency_ms)

struct BudgetCurves {
  std::string task, metric, split;  // e.g. "sst2", "accuracy", "dev"
  std::string unit;  // "FLOPs", "parameters" or "latency"
  long latency_batch = 0, latency_seq = 0;
  double unpruned_latency_ms = 0;  // the speedups' base; 0 when latency was not measured
  std::vector<BudgetCurvePoint> points;  // grouped by method, in plot order
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(BudgetCurves, task, metric, split, unit, latency_batch, latency_seq,
                                                unpruned_latency_ms, points)

// budget_curves.csv: one row per point.
std::string budget_csv(const BudgetCurves& c);
// The metric (95% bootstrap band) against the percentage of the unit kept, one line per method.
core::LineChart budget_chart(const BudgetCurves& c);
// The metric against the measured speedup over the unpruned model; empty when latency was not measured.
std::optional<core::LineChart> pareto_chart(const BudgetCurves& c);

}  // namespace hp::prune
