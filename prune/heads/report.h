// Outputs of a pruning run in RUN_DIR: curves.csv (one row per criterion, seed and point),
// curves.svg/.png (metric vs heads pruned, one line per criterion, 95% band), importance_<crit>.svg/.png
// (layers × heads heatmaps), and run.h5 (importance matrices, masks per point, curves, the config).
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

#include "core/data/glue.h"
#include "prune/heads/curves.h"

namespace hp::prune {

struct CurveReport {
  std::string run_dir, config_yaml;
  const core::TaskSpec* task = nullptr;
  int total_heads = 0;
  std::vector<CurvePoint> points;  // all criteria and seeds
  std::vector<Aggregate> aggregates;  // mean + interval per criterion and point
  std::map<std::string, torch::Tensor> importance;  // criterion → [L, H] (first seed, unpruned model)
};

// Writes curves.csv, the plots and run.h5; returns the files written (relative to run_dir).
std::vector<std::string> write_curve_report(const CurveReport& r);

// Largest fraction of heads pruned (over the schedule points) whose mean metric stays within
// `tolerance` of the unpruned point's; per criterion.
std::map<std::string, double> largest_fraction_within(const std::vector<Aggregate>& aggregates, int total_heads,
                                                      double tolerance);

// Mean of the primary metric (or of `metric` from each point's metrics) over a criterion's points (area under its
// curve, per point).
std::map<std::string, double> curve_area(const std::vector<Aggregate>& aggregates, const std::string& metric = "");

}  // namespace hp::prune
