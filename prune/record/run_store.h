// The record of a pruning run in RUN_DIR/state/: the config it belongs to, and one small JSON file
// per finished importance score and curve point, each written atomically. A restarted run with the
// same config reads them back instead of recomputing; a different config is refused.
#pragma once

#include <torch/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/base/run_folder.h"

namespace hp::prune {

struct CurvePoint {
  std::string criterion;
  int seed = 0;
  int step = 0;  // index into the schedule
  int pruned = 0, kept = 0;  // heads
  std::string mask;  // the pruned heads as a head-mask spec (core/model/head_mask.h)
  std::map<std::string, double> metrics;
  std::vector<float> predictions;  // per evaluation example, dataset order (for the bootstrap)
  long params = 0;
  double flops = 0;  // per example at the evaluation split's mean length
  double eval_seconds = 0, eval_examples_per_s = 0;
  double latency_ms = 0;  // batch-32 forward of the slimmed model; 0 = not measured
};

class RunStore {
 public:
  // Claims `dir` for the run described by `config_yaml`. A missing or empty folder starts a new run;
  // one holding the same config resumes; anything else is a ConfigError naming the folder and the fix.
  RunStore(std::string dir, const std::string& config_yaml);

  bool resumed() const { return resumed_; }
  const std::string& dir() const { return dir_; }
  // A new run (not resumed) refused for a config error after the claim: removes what it wrote, all but the lock
  // and the seed file (latency_table.json), so that the corrected command finds the folder as it was; the
  // lock then removes the folder if it made it. A resumed run's folder stays as it is, and so does one that wrote
  // its summary.json (a result: the frontier of a --max-drop run with no candidate within D).
  void abandon_new_run() const;

  std::optional<CurvePoint> load_point(const std::string& criterion, int seed, int step) const;
  void save_point(const CurvePoint& p) const;

  // Importance matrix [L, H] of `criterion` for `seed` scored with `pruned` heads already removed.
  std::optional<torch::Tensor> load_importance(const std::string& criterion, int seed, int pruned) const;
  void save_importance(const std::string& criterion, int seed, int pruned, const torch::Tensor& importance) const;

 private:
  core::RunLock lock_;  // first: held before the folder is claimed, until the run ends
  std::string dir_;
  bool resumed_ = false;
};

// JSON text of a [L, H] matrix and back.
std::string matrix_json(const torch::Tensor& m);
torch::Tensor matrix_from_json(const std::string& text, const std::string& where);

}  // namespace hp::prune
