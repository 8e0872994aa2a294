// The training step's logged scalars (losses, gradient norm, the gates' expectation, penalty and multipliers) stay
// on the device and are read to the host a few steps at a time: one synchronisation per read, not one per step, so
// that a GPU queues step after step. The loop reads before it evaluates, saves or ends a phase; every rank
// reads at the same steps (the summed columns are all-reduced there).
#pragma once

#include <torch/types.h>

#include <array>
#include <functional>
#include <vector>

namespace hp::train {

// One step's line of metrics.csv.
struct StepRow {
  // Known on the host when the step ends.
  long step = 0;  // after the step (1 = the first)
  int epoch = 0, phase = 1;
  double lr = 0;
  double target = 0;  // the controller's target at the step (gates under a target only)
  bool distilling = false, distilling_hidden = false, gated = false, controlled = false;
  // Read from the device: the whole batch's losses (summed over ranks) ...
  double loss = 0, task_loss = 0, distill = 0, distill_hidden = 0;
  // ... and what every rank holds alike.
  double grad_norm = 0, expected = 0, penalty = 0, lambda1 = 0, lambda2 = 0;
};

class PendingSteps {
 public:
  static constexpr long kReadEvery = 16;  // steps between reads (the progress line refreshes as often)

  // The step's device scalars (undefined = 0), copied as float64 on `device` without a read: `summed` = loss, task
  // loss, distillation, layer distillation (this rank's shares); `same` = gradient norm, expectation, penalty, λ1, λ2.
  void add(const StepRow& host, const std::array<torch::Tensor, 4>& summed, const std::array<torch::Tensor, 5>& same,
           const torch::Device& device);
  bool due() const { return static_cast<long>(rows_.size()) >= kReadEvery; }
  bool empty() const { return rows_.empty(); }
  // The rows in step order after one all-reduce of the summed columns (`sum_over_ranks`, in place) and one host read;
  // empties the buffer.
  std::vector<StepRow> take(const std::function<void(torch::Tensor&)>& sum_over_ranks);
  long reads() const { return reads_; }  // host reads so far

 private:
  std::vector<StepRow> rows_;
  std::vector<torch::Tensor> summed_, same_;  // per step: float64 [4] and [5]
  long reads_ = 0;
};

}  // namespace hp::train
