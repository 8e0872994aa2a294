// The training loop's captured steps, one per length bucket (see train/graph_steps.h).
#include "train/graph_steps.h"

#include <algorithm>
#include <utility>

#include "core/base/errors.h"  // HP_CHECK
#include "core/base/log.h"
#include "core/kernels/device.h"  // HostWaits

namespace hp::train {

namespace {

// `src` (a host batch's tensor) into `dst` on the device, queued: through pinned memory, which the caching host
// allocator keeps until the copy has run.
void copy_in(torch::Tensor& dst, const torch::Tensor& src) {
  dst.copy_(src.is_cpu() ? src.pin_memory() : src, /*non_blocking=*/true);
}

// A host batch into a graph's fixed batch of the same shape.
void copy_in(core::Batch& fixed, const core::Batch& b) {
  copy_in(fixed.input_ids, b.input_ids);
  copy_in(fixed.token_type_ids, b.token_type_ids);
  copy_in(fixed.attention_mask, b.attention_mask);
  copy_in(fixed.labels, b.labels);
  fixed.index = b.index;
}

StepOutputs clone_all(const StepOutputs& o) {
  StepOutputs r;
  for (size_t i = 0; i < o.size(); ++i)
    if (o[i].defined()) r[i] = o[i].detach().clone();
  return r;
}

}  // namespace

GraphSteps::GraphSteps(const torch::Device& device, std::vector<int> buckets, long rows, Step step,
                       std::function<void()> before_capture)
    : device_(device),
      buckets_(std::move(buckets)),
      rows_(rows),
      step_(std::move(step)),
      before_capture_(std::move(before_capture)) {
  HP_CHECK(std::is_sorted(buckets_.begin(), buckets_.end()), "GraphSteps: the length buckets must ascend");
}

GraphSteps::~GraphSteps() = default;

bool GraphSteps::fits(const core::Batch& b) const {
  return b.input_ids.size(0) == rows_ &&
         std::binary_search(buckets_.begin(), buckets_.end(), static_cast<int>(b.input_ids.size(1)));
}

StepOutputs GraphSteps::run(const core::Batch& b) {
  HP_CHECK(fits(b),
           "GraphSteps::run: a batch of " << b.input_ids.size(0) << " x " << b.input_ids.size(1) << " fits no bucket");
  auto it = graphs_.find(b.input_ids.size(1));
  if (it == graphs_.end()) return capture(b);  // the first batch of this length
  Graph& g = it->second;
  copy_in(g.fixed, b);
  g.step->replay();
  ++replays_;
  return clone_all(g.outputs);  // queued after the replay, on the same stream
}

// Makes the bucket's fixed batch from `b`, runs the eager warm-up step on it (this step) and captures the step.
// Returns the warm-up's outputs, copied before the capture made the graph's own (which it has not yet written).
StepOutputs GraphSteps::capture(const core::Batch& b) {
  const long S = b.input_ids.size(1);
  core::log_info("train", "train.cuda_graph: capturing the step of " + std::to_string(rows_) + " x " +
                              std::to_string(S) + " tokens (length bucket " + std::to_string(graphs_.size() + 1) +
                              " of at most " + std::to_string(buckets_.size()) + ")");
  auto [it, inserted] = graphs_.emplace(S, Graph());
  HP_CHECK(inserted, "GraphSteps: the bucket of length " << S << " captured twice");
  Graph& g = it->second;  // std::map: its address stays
  const auto ids = torch::TensorOptions().dtype(torch::kLong).device(device_);
  g.fixed.input_ids = torch::empty({rows_, S}, ids);
  g.fixed.token_type_ids = torch::empty({rows_, S}, ids);
  g.fixed.attention_mask = torch::empty({rows_, S}, ids);
  g.fixed.labels = torch::empty({rows_}, ids.dtype(torch::kFloat32));
  copy_in(g.fixed, b);
  StepOutputs warm;
  try {
    // The capture waits for the device (once per bucket: a setup wait, as the logged scalars' reads are).
    const core::HostWaits setup(core::HostWaits::kAllowed);
    g.step = std::make_unique<CapturedStep>([this, &g] { g.outputs = step_(g.fixed); },
                                            [this, &g, &warm] {
                                              warm = clone_all(g.outputs);
                                              if (before_capture_) before_capture_();
                                            },
                                            device_, /*warmup=*/1);
  } catch (...) {
    graphs_.erase(it);
    throw;
  }
  return warm;
}

}  // namespace hp::train
