// A training step captured once as a CUDA graph and replayed: on a GPU the eager step is bound by launching
// its few hundred kernels, not by the arithmetic, and a replayed graph launches them as one. The step must keep its
// shapes and read nothing back to the host: a fixed batch (the caller copies each batch into the tensors the step
// reads), Optimizer's device lr and step counts (set_step before each replay fills the lr), no .item(). What the
// host does inside the step runs once, at the capture: the step count in torch::optim::AdamW's state (what
// Optimizer::save writes) stays where the capture left it, so a caller that saves after replays sets it first
// (Optimizer::set_step_count). Set the lr outside the captured step: a fill recorded in it replays its value.
// `prune train` captures one per length bucket with train.cuda_graph (train/graph_steps.h); bench/gpu_step_bench
// times it.
#pragma once

#include <functional>
#include <memory>

#include <torch/types.h>

namespace hp::train {

class CapturedStep {
 public:
  // Runs `step` `warmup` times on a side stream of `device` (a GPU) — the allocator, cuBLAS and the optimiser's
  // state settle there —, then `before_capture` (e.g. the optimiser's zero_grad, which sets the gradients to none
  // so that the captured backward writes them afresh) and captures one call of `step`. Throws a hp::Error saying
  // why where there is no CUDA, and LibTorch's error where the capture fails.
  CapturedStep(const std::function<void()>& step, const std::function<void()>& before_capture,
               const torch::Device& device, int warmup = 3);
  ~CapturedStep();
  CapturedStep(const CapturedStep&) = delete;
  CapturedStep& operator=(const CapturedStep&) = delete;

  // The captured step once more, on the current stream, on whatever the fixed tensors hold now.
  void replay();

  // Whether this build can capture (a LibTorch with CUDA).
  static bool available();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hp::train
