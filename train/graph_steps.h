// The training loop's captured steps (train.cuda_graph): on a CUDA device the training batches are padded to a
// few length buckets (core::length_buckets), and each bucket's full batches replay one CUDA graph of the step
// (train/captured_step.h), captured on the bucket's first full batch. Which steps may replay (a fixed structure, one
// process) is the loop's choice (train/loop_step.cpp); this holds the graphs, the fixed batch each reads and what
// each writes. Internal to train/.
#pragma once

#include <torch/types.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "core/data/batching.h"  // Batch
#include "train/captured_step.h"

namespace hp::train {

// One step's scalars that the loop queues (train/pending_steps.h), on the device: loss, task loss, distillation,
// layer distillation, gradient norm; undefined where the step has none.
using StepOutputs = std::array<torch::Tensor, 5>;

class GraphSteps {
 public:
  // One training step on `batch` (device tensors of one bucket's shape): zero_grad, loss, backward, the optimiser's
  // step. Its lr is set before it (Optimizer::set_step), never inside: a fill captured with its value would replay
  // that value.
  using Step = std::function<StepOutputs(const core::Batch& batch)>;
  // `buckets`: the batches' padded lengths (ascending); `rows`: the rows of a full batch; `before_capture`: runs
  // between the eager warm-up step and the capture (the optimiser's zero_grad, so that the captured backward writes
  // the gradients afresh).
  GraphSteps(const torch::Device& device, std::vector<int> buckets, long rows, Step step,
             std::function<void()> before_capture);
  ~GraphSteps();
  GraphSteps(const GraphSteps&) = delete;
  GraphSteps& operator=(const GraphSteps&) = delete;

  // Whether `b` can replay a graph: `rows` rows, padded to one of the buckets.
  bool fits(const core::Batch& b) const;
  // The step on `b` (fits(b)), copied into its bucket's fixed batch (asynchronously, through pinned memory): the
  // bucket's graph replayed, or on its first batch one eager warm-up step on it (this step) and the capture. Returns
  // device copies of what the step wrote (the next replay overwrites the graph's own); nothing is read to the host.
  StepOutputs run(const core::Batch& b);
  const std::vector<int>& buckets() const { return buckets_; }
  int captured() const { return static_cast<int>(graphs_.size()); }
  long replays() const { return replays_; }

 private:
  struct Graph {
    core::Batch fixed;  // input ids, token types, attention mask [rows, S] and labels [rows] on the device
    StepOutputs outputs;  // the tensors the captured step writes
    std::unique_ptr<CapturedStep> step;
  };
  StepOutputs capture(const core::Batch& b);

  torch::Device device_;
  std::vector<int> buckets_;
  long rows_;
  Step step_;
  std::function<void()> before_capture_;
  std::map<long, Graph> graphs_;  // by padded length
  long replays_ = 0;
};

}  // namespace hp::train
