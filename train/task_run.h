// One training run on a GLUE task from a Config: reads and encodes the data, loads the model (and the
// distillation teacher), calls train_model (train/trainer.h) and writes RUN_DIR/train_result.json.
// Used by `prune train` and by the stages of the pruning run (fine-tuning, recovery, gates).
#pragma once

#include <atomic>
#include <string>

#include <nlohmann/json.hpp>

#include "core/base/config.h"
#include "core/data/glue.h"
#include "core/model/head_mask.h"
#include "train/trainer.h"

namespace hp::train {

struct TaskRun {
  std::string model_dir;  // model to start from (cfg.model.path for `prune train`)
  std::string run_dir;  // RUN_DIR
  bool resume = false;  // continue from RUN_DIR/state
  core::HeadSet fixed_keep;  // train with these heads fixed (recovery after pruning); empty = none
  // Distil from this model (gates.distill) instead of model_dir as it starts: the unpruned model a slimmed one
  // recovers from (a budget candidate's recovery, which has no fixed_keep); empty = model_dir.
  std::string teacher_dir;
  long finetune_steps = 0;  // TrainOptions::finetune_steps: > 0 = the gates' fixed-structure fine-tuning's steps
  const std::atomic<bool>* stop = nullptr;
  // Resolved by a caller that already has them (the pruning run's stage 1); null/empty: from cfg.data.
  const core::TaskSpec* task = nullptr;
  std::string data_root;
  // Unlabelled rows a distilled step adds for the teacher to label (prune.distill_tasks, read by the pruning run:
  // prune/data/distill_data.h distill_rows); null: none. Unread where the run does not distil.
  const std::vector<core::Example>* distill_rows = nullptr;
};

// Trains as `cfg` says. The resume check covers everything in cfg except run.out_dir and train.resume.
TrainResult train_task(const core::Config& cfg, const TaskRun& run);

// A result as RUN_DIR/train_result.json holds it (the caller adds what it trained on: task, split): the metric and
// best step, the final metrics and mask, a budget's unit, target and kept fraction, the training time.
nlohmann::json result_json(const TrainResult& r);

// The seconds a finished run in `run_dir` trained (its train_result.json's train_seconds); 0 when it has none.
double train_seconds(const std::string& run_dir);
// Its optimizer steps, all phases (train_result.json's steps); 0 when it has none.
long train_steps(const std::string& run_dir);

}  // namespace hp::train
