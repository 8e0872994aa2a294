// AdamW with decoupled weight decay (Loshchilov & Hutter 2019) over three parameter groups, the
// linear warm-up / linear decay schedule of HF get_linear_schedule_with_warmup, and global-norm
// gradient clipping. The training loop that drives it: train/trainer.h.
#pragma once

#include <torch/types.h>
#include <torch/optim.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/base/config.h"  // TrainConfig

namespace hp::train {

// Group order is fixed: it is the order of param_groups inside saved optimizer states.
enum class ParamGroup { kDecay = 0, kNoDecay = 1, kGates = 2 };

// kNoDecay for names ending in "bias" or containing "LayerNorm" (HF's no_decay list), else kDecay.
ParamGroup param_group_of(const std::string& name);

// HF get_linear_schedule_with_warmup: the lr multiplier for 0-based `step` (the step about to be taken):
// step / warmup while step < warmup, then (total - step) / (total - warmup), never below 0.
double linear_schedule(long step, long warmup_steps, long total_steps);

// ceil(ratio * total_steps), as HF TrainingArguments.get_warmup_steps.
long warmup_steps_for(double ratio, long total_steps);

// Global L2 norm of the gradients of `params` (undefined grads skipped), without clipping.
double grad_norm(const std::vector<torch::Tensor>& params);

class Optimizer {
 public:
  // `params`: the model's HF-named tensors that train (requires_grad); `gate_params`: the gates' log α
  // (gates::StructureGates::parameters(); empty = no gates group), trained at `gates_lr` without weight decay.
  Optimizer(const core::TrainConfig& cfg, const std::map<std::string, torch::Tensor>& params,
            const std::vector<torch::Tensor>& gate_params, double gates_lr, long total_steps);

  // Sets every group's lr to its base lr × linear_schedule(step). Call before each step.
  void set_step(long step);
  // Current lr of the encoder groups (the gates group scales the same way).
  double lr() const { return lr_; }
  void zero_grad();
  // Clips the model parameters' global gradient norm to cfg.grad_clip (0 = off; the gate parameters
  // are not clipped) and takes one AdamW step, in which a parameter without a gradient steps as with a zero one
  // (so a resumed run steps as the uninterrupted one). Returns the norm before clipping, a scalar tensor on the
  // parameters' device on the fused path (not read to the host there).
  torch::Tensor step();

  // Names of the model parameters in `group` (for tests and logs).
  const std::vector<std::string>& members(ParamGroup group) const { return names_[static_cast<int>(group)]; }
  long total_steps() const { return total_steps_; }
  long warmup_steps() const { return warmup_steps_; }

  // Whether step() takes its multi-tensor path: ATen's fused AdamW kernel over each group and one norm over all
  // gradients (a few kernels a step instead of a dozen per parameter, which on a GPU cost more than the maths),
  // with the same moments and step counts in torch::optim::AdamW's state (save/load unchanged). On by default when
  // the parameters are on a CUDA device and LibTorch has the kernel (2.4 and later); tests turn it on for the CPU.
  static bool fused_available();
  bool fused() const { return fused_; }
  void set_fused(bool on);

  // Sets the step count of every parameter in torch::optim::AdamW's state (what save writes) to `n`: a captured
  // step's replays advance only the device copies (train/captured_step.h), so a caller that replayed sets the
  // true count before it saves. The device copies are left as they are.
  void set_step_count(long n);

  // Optimizer moments and step counts, via torch::serialize (exact round trip).
  void save(const std::string& path) const;
  void load(const std::string& path);
  torch::optim::AdamW& adamw() { return *adamw_; }

 private:
  core::TrainConfig cfg_;
  long total_steps_, warmup_steps_;
  double lr_ = 0;
  std::vector<double> base_lr_;  // per param group
  std::vector<std::string> names_[3];
  std::vector<torch::Tensor> clip_params_;  // model parameters (gates excluded)
  std::unique_ptr<torch::optim::AdamW> adamw_;
  bool fused_ = false;
  std::vector<std::vector<torch::Tensor>> fused_steps_;  // per group: each parameter's step count on its device
  // Per group on a GPU: the lr as a 0-dim float32 tensor there, which set_step fills, so a step captured in a CUDA
  // graph reads the lr of the step it replays (the CPU's kernel takes the lr as a number, as before).
  std::vector<torch::Tensor> fused_lr_;
  torch::Tensor clip_and_norm();  // the fused path's clipping; the norm before it (not read)
  void fused_adamw();
};

}  // namespace hp::train
