// Deferred reads of the training step's scalars (see train/pending_steps.h).
#include "train/pending_steps.h"

#include "core/kernels/device.h"  // to_device, HostWaits

namespace hp::train {

namespace {

template <size_t N>
torch::Tensor column(const std::array<torch::Tensor, N>& values, const torch::Device& device) {
  std::vector<torch::Tensor> v;
  for (const auto& t : values)
    v.push_back(t.defined() ? core::to_device(t.detach(), device).to(torch::kFloat64).reshape({})
                            : torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device)));
  return torch::stack(v);
}

}  // namespace

void PendingSteps::add(const StepRow& host, const std::array<torch::Tensor, 4>& summed,
                       const std::array<torch::Tensor, 5>& same, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  rows_.push_back(host);
  summed_.push_back(column(summed, device));
  same_.push_back(column(same, device));
}

std::vector<StepRow> PendingSteps::take(const std::function<void(torch::Tensor&)>& sum_over_ranks) {
  std::vector<StepRow> rows;
  rows.swap(rows_);
  if (rows.empty()) return rows;
  const core::HostWaits reading(core::HostWaits::kAllowed);  // the one deliberate wait (tests forbid the others)
  torch::Tensor summed = torch::stack(summed_);  // [n, 4]
  if (sum_over_ranks) sum_over_ranks(summed);
  const torch::Tensor v = torch::cat({summed, torch::stack(same_)}, 1).to(torch::kCPU).contiguous();  // the read
  summed_.clear(), same_.clear();
  ++reads_;
  const auto a = v.accessor<double, 2>();
  for (size_t i = 0; i < rows.size(); ++i) {
    StepRow& r = rows[i];
    const long k = static_cast<long>(i);
    r.loss = a[k][0], r.task_loss = a[k][1], r.distill = a[k][2], r.distill_hidden = a[k][3];
    r.grad_norm = a[k][4], r.expected = a[k][5], r.penalty = a[k][6], r.lambda1 = a[k][7], r.lambda2 = a[k][8];
  }
  return rows;
}

}  // namespace hp::train
