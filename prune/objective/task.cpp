// A task's objective: its classifier, regressor or tagger scored by the task's metric (see prune/objective/objective.h).
#include <utility>

#include "eval/metrics.h"
#include "prune/objective/objective.h"

namespace hp::prune {

namespace {

class TaskObjective final : public Objective {
 public:
  TaskObjective(const core::TaskSpec& task, const core::EncodedDataset& eval, const std::vector<core::Batch>& eval_b,
                const core::EncodedDataset& select, const std::vector<core::Batch>& select_b)
      : task_(task), eval_(eval), select_(select), eval_batches_(eval_b), select_batches_(select_b) {}

  std::string name() const override {
    return task_.head == core::Head::kToken ? "token_classification"
           : task_.is_regression()          ? "regression"
                                            : "sequence_classification";
  }
  const core::TaskSpec& task() const override { return task_; }
  eval::EvalResult evaluate(const core::Bert& model, Split split, const eval::Masks& masks) const override {
    return split == Split::kEval ? eval::evaluate(model, task_, eval_, eval_batches_, masks)
                                 : eval::evaluate(model, task_, select_, select_batches_, masks);
  }
  std::vector<float> gold(Split split) const override {
    return core::gold_labels(split == Split::kEval ? eval_ : select_);
  }
  double metric_of(const std::vector<float>& predictions, const std::vector<float>& gold) const override {
    return eval::compute_metrics(task_, predictions, gold).at(task_.primary_metric);
  }
  double mean_length() const override { return core::mean_length(eval_); }

 private:
  const core::TaskSpec& task_;
  const core::EncodedDataset &eval_, &select_;
  const std::vector<core::Batch>&eval_batches_, &select_batches_;
};

}  // namespace

std::unique_ptr<Objective> make_task_objective(const core::TaskSpec& task, const core::EncodedDataset& eval,
                                               const std::vector<core::Batch>& eval_batches,
                                               const core::EncodedDataset& select,
                                               const std::vector<core::Batch>& select_batches) {
  return std::make_unique<TaskObjective>(task, eval, eval_batches, select, select_batches);
}

}  // namespace hp::prune
