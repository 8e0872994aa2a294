// The training loop: fine-tuning on a GLUE task, optionally with Hard-Concrete head gates (plain L0,
// or the exact-N Lagrangian target mode followed by fixed-heads fine-tuning with optional distillation).
// Evaluates, keeps the best checkpoint, writes metrics.csv / run.h5 and resumable state.
// AdamW + schedule: train/optim.h; KL: train/distill.h; state and logs: train/run_state.h; gates: gates/.
#pragma once

#include <torch/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <string>

#include "core/data/batching.h"  // EncodedDataset
#include "core/model/bert.h"
#include "core/base/config.h"  // TrainConfig, GateConfig, RunConfig
#include "core/data/glue.h"  // TaskSpec
#include "core/model/head_mask.h"  // HeadSet
#include "eval/evaluator.h"  // Masks

namespace hp::train {

// An objective of the caller's in place of the task's labels (the embedding objective): what a step minimises
// and what picks the best checkpoint. The teacher (TrainOptions::teacher, required) runs on every step, every
// position computed for both models; gates.distill_hidden > 0 adds CoFi's layer term as with a task. No logit
// distillation: the objective is the teacher's own output.
struct Objective {
  std::string metric;  // the evaluation's primary metric: higher is better
  // The step's loss (a scalar, fp32) from the student's and the teacher's outputs on `in` (the teacher's carry no
  // gradient).
  std::function<torch::Tensor(const core::EncoderOutput& student, const core::EncoderOutput& teacher,
                              const core::EncoderInput& in)>
      loss;
  // The metrics of `model` under `masks` (eval mode, no gradient); holds `metric`.
  std::function<std::map<std::string, double>(const core::Bert& model, const eval::Masks& masks)> evaluate;
};

struct TrainData {
  const core::TaskSpec* task = nullptr;
  const core::EncodedDataset* train = nullptr;  // with an objective: unlabelled (labels unread)
  // Must hold labels: it picks the best checkpoint. With an objective, the objective's evaluation does, and this
  // only gives a budget's mean length (FLOPs are counted at it).
  const core::EncodedDataset* eval = nullptr;
  int pad_id = 0;
  int eval_batch_size = 64;
  const Objective* objective = nullptr;  // null: the task's loss and metrics on the labels
  // Unlabelled rows (prune.distill_tasks): a distilled step of a task adds as many of them as it has labelled rows,
  // for the teacher alone to label (train/augment.h with_unlabelled_rows); null or empty: none.
  const core::EncodedDataset* distill_rows = nullptr;
};

struct TrainOptions {
  std::string run_dir;  // RUN_DIR: state/, best/, metrics.csv, run.h5, head_mask.txt
  std::string config_yaml;  // the config that must match on resume (dump_yaml without paths)
  std::string tokenizer_dir;  // copied into RUN_DIR/best (vocab.txt, ...); empty = none
  bool resume = false;  // continue from RUN_DIR/state
  const core::Bert* teacher = nullptr;  // frozen unpruned model for gates.distill
  // Non-empty: train with these heads fixed (no gates), e.g. recovery after pruning; with a teacher
  // and gates.distill the whole run distils.
  core::HeadSet fixed_keep;
  long stop_after_steps = 0;  // > 0: save state and stop after this many steps (tests, budgets)
  // > 0: the fine-tuning with the structure fixed after target-mode gates lasts this many steps, not
  // gates.finetune_epochs epochs (a pruning run's budget gates recover as long as its other candidates do).
  long finetune_steps = 0;
  const std::atomic<bool>* stop = nullptr;  // set (e.g. by SIGINT): save state and stop after the step
  // Tests: a CUDA operation inside a training step by which the host waits for the GPU throws (core::HostWaits;
  // the reads of the logged scalars, every few steps, are the allowed ones).
  bool forbid_host_waits = false;
};

struct TrainResult {
  long steps = 0;  // optimizer steps done, all phases
  long steps_per_epoch = 0;  // batches in one pass over the training split
  bool interrupted = false;  // stopped early with resumable state saved
  std::string metric;  // the task's primary metric
  double best_metric = 0;  // best value during training (the eval mask of its time)
  long best_step = -1;
  std::map<std::string, double> final_metrics;  // RUN_DIR/best re-loaded and evaluated with final_keep
  core::HeadSet final_keep;  // heads kept (all, without gates)
  core::NeuronSet final_neurons;  // FFN neurons kept under a FLOPs or parameter target; empty otherwise (all kept)
  std::vector<bool> final_layers;  // layers kept under layer gates (gates.layer_gates); empty = all kept
  std::vector<bool> final_hidden;  // hidden channels kept under hidden gates (gates.hidden_gates); empty = all kept
  int heads_kept = 0, heads_total = 0;
  // Under gates.target_flops or target_params: "FLOPs" or "parameters", the target and the fraction the final
  // structure keeps (of the encoder's cost in that unit), and the unit costs it was counted with.
  std::string budget_unit;
  double budget_target = 0, budget_kept = 0;
  core::UnitCosts unit_costs;
  torch::Tensor log_alpha;  // final gate parameters [L, H]; undefined without gates
  double train_seconds = 0;  // time in training steps (evaluation excluded), a resumed run's earlier processes included
  double steps_per_s = 0, examples_per_s = 0;  // this process's
  long host_reads = 0;  // reads of the steps' logged scalars to the host in this process (train/pending_steps.h)
  // train.cuda_graph on a GPU, this process: the steps' graphs captured (one per length bucket and phase) and the
  // steps that replayed one (train/graph_steps.h); 0 where every step ran eagerly.
  int graphs_captured = 0;
  long graph_replays = 0;
};

// ConfigError when train.precision = bf16 cannot run on `device`: on the CPU, oneDNN's bf16 products need AVX-512
// under HEADPRUNE_MAX_ISA (below it LibTorch's bf16 matmuls are refused mid-run).
void check_bf16_training(const std::string& precision, const torch::Device& device);

// Trains `model` in place (its tensors get requires_grad). Throws ConfigError for bad train/gates
// values (see validate_train_config), InputError for unusable state on resume.
TrainResult train_model(const core::TrainConfig& train, const core::GateConfig& gates, const core::RunConfig& run,
                        core::Bert& model, const TrainData& data, const TrainOptions& opts);

// Range checks of train.* and the gate keys the trainer uses; ConfigError naming the key and the fix.
// `total_heads` is the model's L·H (for gates.target_heads).
void validate_train_config(const core::TrainConfig& train, const core::GateConfig& gates, int total_heads);

// A FLOPs or parameter target's model checks: not slimmed, gates.neuron_group dividing its FFN width (ConfigError).
void check_budget_model(const core::GateConfig& gates, const core::BertConfig& arch);


}  // namespace hp::train
