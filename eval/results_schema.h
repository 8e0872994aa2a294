// The datasets of run.h5, in one table that every writer and reader uses: the pruning run writes the
// importance, mask and curve datasets (prune/heads/report.cpp), a training run the gate trajectories
// (train/run_state.cpp); `prune report` (analysis/report/report_panels.cpp), `prune analyze --prune-run`
// (analysis/) and the gates criterion (prune/heads/criteria.cpp) read them. Torch-free: names only.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hp::eval::results {

// One kind of dataset: its name pattern, shape and meaning (K: curve points, E: evaluations).
enum class Dataset {
  kImportance,
  kMasks,
  kCurveSeries,
  kCurveStat,
  kGateLogAlpha,
  kGatePOpen,
  kGateNeuronPOpen,
  kGateMhaPOpen,
  kGateFfnPOpen,
  kGateLayerPOpen,
  kGateHiddenPOpen
};
// The gate trajectories of a training run: one tensor per evaluation, stacked (the names are whole keys).
inline constexpr Dataset kGateTrajectories[] = {Dataset::kGateLogAlpha, Dataset::kGatePOpen, Dataset::kGateNeuronPOpen,
                                                Dataset::kGateMhaPOpen, Dataset::kGateFfnPOpen,
                                                Dataset::kGateLayerPOpen, Dataset::kGateHiddenPOpen};
struct DatasetSpec {
  Dataset kind;
  const char* pattern;
  const char* shape;
  const char* meaning;
};
const std::vector<DatasetSpec>& run_h5_datasets();

// The common prefix of a kind's names ("importance/", "masks/", "curves/", "gates/log_alpha", …): what a
// reader scans a sorted file from.
std::string prefix(Dataset kind);

// Names. `series` is the task's primary metric or "heads_pruned"; `stat` is "mean", "ci_lo" or "ci_hi".
std::string importance_key(const std::string& criterion);
std::string masks_key(const std::string& criterion, int seed);
std::string curve_series_key(const std::string& criterion, int seed, const std::string& series);
std::string curve_stat_key(const std::string& criterion, const std::string& stat);
inline constexpr const char* kHeadsPruned = "heads_pruned";
inline constexpr const char* kStats[] = {"mean", "ci_lo", "ci_hi"};

// A name taken apart; empty for a name of no kind in the table.
struct KeyParts {
  Dataset kind;
  std::string criterion;  // importance, masks, curves
  int seed = -1;  // masks, curve series
  std::string last;  // curve series: the series; curve stat: the stat
};
std::optional<KeyParts> parse_key(const std::string& key);

}  // namespace hp::eval::results
