// A task's objective: its classifier, regressor or tagger scored by the task's metric (see prune/objective/objective.h).
#include <filesystem>

#include "core/base/errors.h"
#include "eval/evaluator.h"
#include "eval/metrics.h"
#include "prune/objective/objective.h"
#include "train/task_run.h"

namespace hp::prune {

namespace {

class TaskObjective final : public Objective {
 public:
  explicit TaskObjective(const TaskData& d) : d_(d) {}

  std::string name() const override {
    return d_.task->head == core::Head::kToken ? "token_classification"
           : d_.task->is_regression()          ? "regression"
                                               : "sequence_classification";
  }
  const core::TaskSpec& task() const override { return *d_.task; }
  eval::EvalResult evaluate(const core::Bert& model, Split split, const eval::Masks& masks) const override {
    return split == Split::kEval ? eval::evaluate(model, *d_.task, *d_.eval, *d_.eval_batches, masks)
                                 : eval::evaluate(model, *d_.task, *d_.select, *d_.select_batches, masks);
  }
  long size(Split split) const override {
    return static_cast<long>((split == Split::kEval ? d_.eval : d_.select)->size());
  }
  std::vector<float> gold(Split split) const override {
    return core::gold_labels(split == Split::kEval ? *d_.eval : *d_.select);
  }
  double metric_of(const std::vector<float>& predictions, const std::vector<float>& gold) const override {
    return eval::compute_metrics(*d_.task, predictions, gold).at(d_.task->primary_metric);
  }
  double mean_length() const override { return core::mean_length(*d_.eval); }
  void save(const core::Bert& model, const std::string& dir, const core::Config& cfg) const override {
    core::save_bert(model, dir, cfg.model.path, /*hdf5=*/true, cfg.export_.max_shard_mb);
  }
  core::Bert load(const std::string& dir, const core::LoadOptions& options) const override {
    return core::load_bert(dir, options);
  }
  OrtSource ort_source(const std::string& model_dir) const override { return {model_dir, *d_.eval, false}; }
  double metric_of_outputs(const torch::Tensor& logits) const override {
    return eval::compute_metrics(*d_.task, eval::predictions_of(logits, *d_.eval, d_.task->is_regression()),
                                 core::gold_labels(*d_.eval))
        .at(d_.task->primary_metric);
  }
  bool train(const TrainRequest& r) const override {
    train::TaskRun run;
    run.teacher_dir = r.teacher_dir;
    run.model_dir = r.from;
    run.run_dir = r.run_dir;
    run.resume = std::filesystem::exists(r.run_dir + "/state");
    run.fixed_keep = r.fixed_keep;
    run.stop = r.stop;
    run.task = d_.task;
    run.data_root = d_.data_root;
    run.finetune_steps = r.finetune_steps;
    if (d_.distill_rows && !d_.distill_rows->empty()) run.distill_rows = d_.distill_rows;
    return !train::train_task(*r.cfg, run).interrupted;
  }

 private:
  TaskData d_;
};

}  // namespace

std::unique_ptr<Objective> make_task_objective(const TaskData& data) { return std::make_unique<TaskObjective>(data); }

}  // namespace hp::prune
