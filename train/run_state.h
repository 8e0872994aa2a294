// What a run leaves on disk to be continued or inspected: the resumable state in RUN_DIR/state/
// (weights, AdamW moments, gates, RNG, loop position; written atomically), the append-only
// RUN_DIR/metrics.csv, and the in-memory History that becomes RUN_DIR/run.h5 at the end.
// The loop that fills them: train/trainer.h.
#pragma once

#include <torch/types.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/model/bert.h"
#include "core/io/tensor_io.h"  // TensorMap
#include "train/optim.h"

namespace hp::train {

// Scalar series and the gate trajectories of one run. Names are the run.h5 dataset names:
// "train/<scalar>" [steps], "eval/<metric>" [evals], and the gate trajectories of eval/results_schema.h
// (kGateTrajectories: "gates/log_alpha", "gates/p_open" [evals, L, H]; with a FLOPs or parameter target
// "gates/neuron_p_open", "gates/mha_p_open", "gates/ffn_p_open" [evals, L]).
struct History {
  std::map<std::string, std::vector<double>> series;
  std::map<std::string, std::vector<torch::Tensor>> trajectories;  // name → one tensor per evaluation

  void add(const std::string& key, double value) { series[key].push_back(value); }
  core::TensorMap to_tensors() const;
  static History from_tensors(const core::TensorMap& tensors);
};

// The loop position and everything else besides tensors owned by modules that a resume needs.
struct RunState {
  long step = 0;  // optimizer steps finished, both phases together
  int phase = 1;  // 1: training (gates, if any); 2: fixed-heads fine-tuning (target mode)
  long phase_step = 0;  // steps finished in this phase (drives the schedule)
  int epoch = 0;  // 0-based epoch of the next batch, within the phase
  long batch_in_epoch = 0;  // batches of `epoch` already trained
  bool has_best = false;
  double best_metric = 0;
  long best_step = -1;
  double train_seconds = 0;  // time in the training steps this state covers, over every process that ran them
  std::string config_hash;
  int processes = 1;  // data-parallel ranks that saved this state
  std::string config_yaml;  // the resolved config the run started with
  torch::Tensor rng_state;  // default CPU generator state (dropout, gate noise)
  torch::Tensor device_rng_state;  // a GPU run's generator there (its dropout); undefined on the CPU
  // gates::StructureGates::named() and the layer-distillation map (LayerDistill::parameters()); empty without both
  std::map<std::string, torch::Tensor> gates;
  torch::Tensor best_log_alpha;  // heads' log α at the best evaluation; undefined without gates
  torch::Tensor controller_state;  // gates::TargetController::state(); undefined outside target mode
  History history;
};

// FNV-1a 64 of `text`, as 16 hex digits.
std::string config_hash(const std::string& text);

// Dataset positions of one epoch: a Fisher-Yates shuffle from a generator seeded by (seed, phase,
// epoch) alone, so a resumed run recomputes the same order.
std::vector<long> epoch_order(long n, int seed, int phase, int epoch);

// `order` (an epoch's shuffle) grouped by length as Hugging Face's LengthGroupedSampler groups it
// (get_length_grouped_indices): cut into mega-batches of m · batch_size positions, m = min(n / (4 · batch_size), 50)
// and at least 1; each sorted by `lengths` longest first (stable); the first position of the mega-batch holding the
// longest example swapped with the very first, so the largest batch comes first. Every position once.
std::vector<long> length_grouped(const std::vector<long>& order, const std::vector<size_t>& lengths, int batch_size);

// A generator seed for one step's draws (the word swaps of train/augment.h) from (seed, step) alone, as epoch_order.
uint64_t step_seed(int seed, long step);

// The default CPU generator's state (uint8 tensor) and its inverse.
torch::Tensor cpu_rng_state();
void set_cpu_rng_state(const torch::Tensor& state);

// RUN_DIR/state, the folder save_run_state writes (through state.tmp and a rename).
std::string state_dir(const std::string& run_dir);

// Writes weights, optimizer moments and `s` into RUN_DIR/state atomically (state.tmp, then rename).
void save_run_state(const std::string& run_dir, const RunState& s, const core::Bert& model, const Optimizer& opt);

// Reads RUN_DIR/state (InputError naming the folder when absent or incomplete) and copies its weights
// into `model` (same architecture). Load the optimizer with optimizer_file(run_dir), from the same state folder.
RunState read_run_state(const std::string& run_dir, core::Bert& model);
std::string optimizer_file(const std::string& run_dir);

// ConfigError naming the changed keys when `current_yaml` hashes differently from the saved run.
void check_resume_config(const std::string& run_dir, const RunState& s, const std::string& current_yaml);

// Replaces folder `final_dir` by `tmp_dir` (rename; the old folder is removed after the swap).
void replace_dir(const std::string& tmp_dir, const std::string& final_dir);

// RUN_DIR/metrics.csv in long form, one scalar per row: step,epoch,key,value.
class MetricsLog {
 public:
  // keep_until_step < 0 starts a new file; otherwise rows with step > keep_until_step (written after
  // the state a resume starts from) are dropped first.
  MetricsLog(const std::string& path, long keep_until_step);
  void add(long step, int epoch, const std::string& key, double value);
  void flush() { out_.flush(); }

 private:
  void open(const std::string& path, long keep_until_step);
  std::ofstream out_;
};

}  // namespace hp::train
