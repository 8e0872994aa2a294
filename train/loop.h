// The training loop's state and steps, shared by its two files: train/trainer.cpp (the phases, evaluation, state,
// result) and train/loop_step.cpp (one step's loss, backward and logged scalars). Internal to train/: callers use
// train_model (train/trainer.h).
#pragma once

#include <torch/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/base/log.h"  // Progress
#include "core/dist/distributed.h"  // GradientReducer
#include "eval/evaluator.h"
#include "gates/structure_gates.h"
#include "gates/target_controller.h"
#include "train/augment.h"
#include "train/distill.h"
#include "train/graph_steps.h"
#include "train/optim.h"
#include "train/pending_steps.h"
#include "train/run_state.h"
#include "train/trainer.h"

namespace hp::train::detail {

// Everything one run holds; phases share it. Member functions are the loop's steps.
class Loop {
 public:
  Loop(const core::TrainConfig& tc, const core::GateConfig& gc, const core::RunConfig& rc, core::Bert& model,
       const TrainData& data, const TrainOptions& opts);

  TrainResult run();

 private:
  void record(const std::string& key, double value) { record_at(s_.step, s_.epoch, key, value); }
  // The metric that picks the best checkpoint: the objective's, or the task's primary one.
  const std::string& metric() const { return data_.objective ? data_.objective->metric : data_.task->primary_metric; }
  std::map<std::string, double> evaluate(const core::Bert& model, const eval::Masks& masks) const {
    if (data_.objective) return data_.objective->evaluate(model, masks);
    return eval::evaluate(model, *data_.task, *data_.eval, eval_batches_, masks).metrics;
  }
  void record_at(long step, int epoch, const std::string& key, double value) {
    s_.history.add(key, value);
    log_->add(step, epoch, key, value);
  }
  gates::GateMasks eval_mask() const;
  core::StructureMask target_structure() const;  // target mode: the exact-N heads, or the structure on the budget
  // What the Lagrangian holds at the target: the expected open heads, or the expected percent of the budget's
  // unit kept (differentiable scalar).
  torch::Tensor constrained() const {
    return budget_mode_ ? 100.0 * gates_->expected_cost(costs_) / total_cost_ : gates_->heads().expected_open();
  }
  // One step on `b`: through `graphs` where it fits there (null: every step eager).
  void train_step(const core::Batch& b, Optimizer& opt, core::dist::GradientReducer& reducer, GraphSteps* graphs);
  // This phase's captured steps under train.cuda_graph, or null (the CPU, or a phase whose steps stay eager: logged).
  std::unique_ptr<GraphSteps> make_graphs(Optimizer& opt);
  std::string eager_reason(const Optimizer& opt) const;  // why this phase's steps stay eager; empty: they capture
  // The step a graph captures: the fixed structure's loss under device masks (graph_fixed_), backward, AdamW.
  StepOutputs graph_step(const core::Batch& fixed, Optimizer& opt);
  void read_steps(core::Progress& progress);
  struct StepLoss {
    // This rank's share; kd undefined unless distilling, layer unless distilling hidden states.
    torch::Tensor loss, task_loss, kd, layer;
    bool distilling = false;
  };
  StepLoss batch_loss(const core::Batch& b);
  // Whether this phase's steps distil from the teacher: target mode's fixed-structure phase, a budget target's (as
  // CoFi) both phases, a recovery (no gates: heads fixed by a mask, or a slimmed model) throughout.
  bool distils() const { return opts_.teacher && gc_.distill && (s_.phase == 2 || budget_mode_ || !gates_); }
  // Some of a task's rows the teacher alone labels (NaN): word swaps, prune.distill_tasks' rows.
  bool unlabelled_rows() const { return swap_ || extra_rows(); }
  bool extra_rows() const { return data_.distill_rows && data_.distill_rows->size() > 0 && !data_.objective; }
  // A distilled step's batch: its word swaps, then the unlabelled rows, drawn from (seed, step): the same on every
  // rank and after a resume.
  core::Batch augmented(const core::Batch& b) const;
  void objective_loss(const core::EncoderInput& in, const core::Batch& local, double share, StepLoss& r);
  void evaluate_and_keep_best();
  void save_best(const torch::Tensor& mask_log_alpha);
  void save_best_here(const torch::Tensor& log_alpha);
  void save_state(const Optimizer& opt);
  bool run_phase(int phase, bool resumed_here);  // false = interrupted
  void set_trainable(bool encoder);
  core::StructureMask final_keep() const;
  bool start_or_resume();
  void fix_structure();
  TrainResult finish();
  TrainResult interrupted_result() const {
    TrainResult r;
    r.steps = s_.step, r.interrupted = true;
    r.graphs_captured = graphs_captured_, r.graph_replays = graph_replays_;
    if (gates_) r.log_alpha = gates_->heads().log_alpha().detach().cpu().clone();
    return r;
  }

  const core::TrainConfig& tc_;
  const core::GateConfig& gc_;
  const core::RunConfig& rc_;
  core::Bert& model_;
  const TrainData& data_;
  const TrainOptions& opts_;
  int L_ = 0, H_ = 0;
  bool target_mode_ = false;  // a Lagrangian target: exact-N heads or a budget
  bool budget_mode_ = false;  // gates.target_flops or target_params
  core::UnitCosts costs_;  // the budget's unit costs, and the unpruned encoder's total in that unit
  double total_cost_ = 0;
  long steps_per_epoch_ = 0;
  long phase_total_[3] = {0, 0, 0};
  std::unique_ptr<gates::StructureGates> gates_;
  std::unique_ptr<gates::TargetController> controller_;
  std::unique_ptr<LayerDistill> layer_distill_;  // gates.distill_hidden > 0 with a teacher, budget gates
  // A recovery (no gates) with a teacher and gates.distill_hidden > 0: each layer's output matched to the teacher's
  // at the same depth, no map (train/embedding_objective.h hidden_distill_loss; the recovered model keeps the layers
  // and the width).
  bool same_depth_distill_ = false;
  // gates.distill_augment > 0 with a task's distillation: the distilled steps' word swaps (train/augment.h).
  std::unique_ptr<WordSwap> swap_;
  std::vector<core::Batch> eval_batches_;
  std::vector<size_t> train_lengths_;  // each training example's tokens (train.group_by_length)
  // 0/1 masks in phase 2 (heads [L, H], neurons [L, I] with a budget), or all along with opts_.fixed_keep (heads).
  gates::GateMasks fixed_;
  // The same on the device for a captured step, each undefined where fixed_'s is all ones (as the model skips it): a
  // graph may not copy from the host. in_graph_: batch_loss is being called by graph_step.
  gates::GateMasks graph_fixed_;
  bool in_graph_ = false;
  int graphs_captured_ = 0;  // over the phases, this process
  long graph_replays_ = 0;
  std::unique_ptr<MetricsLog> log_;
  PendingSteps pending_;  // the steps' scalars not yet read to the host
  RunState s_;
  long examples_done_ = 0;
  double train_seconds_ = 0;  // this process's
  double earlier_seconds_ = 0;  // the state's resumed from: the processes before
  long steps_this_process_ = 0;
};

}  // namespace hp::train::detail
