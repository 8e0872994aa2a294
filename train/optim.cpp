// AdamW groups, schedule and clipping (see train/optim.h).
#include "train/optim.h"

#include <torch/nn/utils/clip_grad.h>
#include <torch/optim.h>
#include <torch/serialize.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>

#include "core/base/errors.h"  // InternalError (HP_CHECK)

namespace hp::train {

ParamGroup param_group_of(const std::string& name) {
  const std::string bias = "bias";
  bool is_bias = name.size() >= bias.size() && name.compare(name.size() - bias.size(), bias.size(), bias) == 0;
  if (is_bias || name.find("LayerNorm") != std::string::npos) return ParamGroup::kNoDecay;
  return ParamGroup::kDecay;
}

double linear_schedule(long step, long warmup_steps, long total_steps) {
  if (step < warmup_steps) return static_cast<double>(step) / static_cast<double>(std::max(1L, warmup_steps));
  return std::max(
      0.0, static_cast<double>(total_steps - step) / static_cast<double>(std::max(1L, total_steps - warmup_steps)));
}

long warmup_steps_for(double ratio, long total_steps) {
  return static_cast<long>(std::ceil(ratio * static_cast<double>(total_steps)));
}

double grad_norm(const std::vector<torch::Tensor>& params) {
  torch::NoGradGuard no_grad;
  double sq = 0;
  for (const auto& p : params)
    if (p.grad().defined()) sq += p.grad().to(torch::kFloat64).pow(2).sum().item<double>();
  return std::sqrt(sq);
}

Optimizer::Optimizer(const core::TrainConfig& cfg, const std::map<std::string, torch::Tensor>& params,
                     const std::vector<torch::Tensor>& gate_params, double gates_lr, long total_steps)
    : cfg_(cfg), total_steps_(total_steps), warmup_steps_(warmup_steps_for(cfg.lr_warmup_ratio, total_steps)) {
  std::vector<torch::Tensor> groups[3];
  for (const auto& [name, t] : params) {  // std::map: sorted names, so group order is deterministic
    if (!t.requires_grad()) continue;
    int g = static_cast<int>(param_group_of(name));
    groups[g].push_back(t);
    names_[g].push_back(name);
    clip_params_.push_back(t);
  }
  auto options = [&](double lr, double wd) {
    return torch::optim::AdamWOptions(lr)
        .betas(std::make_tuple(cfg.adam_beta1, cfg.adam_beta2))
        .eps(cfg.adam_eps)
        .weight_decay(wd);
  };
  // Empty groups stay in place (e.g. a frozen encoder) so the group order never shifts.
  std::vector<torch::optim::OptimizerParamGroup> pg;
  pg.emplace_back(groups[0], std::make_unique<torch::optim::AdamWOptions>(options(cfg.lr_peak, cfg.weight_decay)));
  pg.emplace_back(groups[1], std::make_unique<torch::optim::AdamWOptions>(options(cfg.lr_peak, 0.0)));
  base_lr_ = {cfg.lr_peak, cfg.lr_peak};
  if (!gate_params.empty()) {
    for (const auto& t : gate_params) {
      HP_CHECK(t.defined() && t.requires_grad(), "gate parameters must require grad");
      names_[2].push_back("gates." + std::to_string(names_[2].size()));
    }
    pg.emplace_back(gate_params, std::make_unique<torch::optim::AdamWOptions>(options(gates_lr, 0.0)));
    base_lr_.push_back(gates_lr);
  }
  adamw_ = std::make_unique<torch::optim::AdamW>(std::move(pg), options(cfg.lr_peak, cfg.weight_decay));
  set_step(0);
}

void Optimizer::set_step(long step) {
  double m = linear_schedule(step, warmup_steps_, total_steps_);
  auto& groups = adamw_->param_groups();
  for (size_t g = 0; g < groups.size(); ++g) groups[g].options().set_lr(base_lr_[g] * m);
  lr_ = cfg_.lr_peak * m;
}

void Optimizer::zero_grad() { adamw_->zero_grad(); }

double Optimizer::step() {
  // A parameter the loss did not reach this step (the layer-distillation map when no layer matched) steps with a
  // zero gradient, as it does after any earlier step (zero_grad keeps zeros) and in a data-parallel run (the
  // all-reduce fills every gradient). Skipping it only when no step gave it a gradient yet made the first step
  // after a resume differ from the uninterrupted run's (#44 item 9).
  for (auto& group : adamw_->param_groups())
    for (auto& p : group.params())
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
  double norm = 0;
  if (!clip_params_.empty()) {
    if (cfg_.grad_clip > 0) norm = torch::nn::utils::clip_grad_norm_(clip_params_, cfg_.grad_clip);
    else norm = grad_norm(clip_params_);
  }
  adamw_->step();
  return norm;
}

void Optimizer::save(const std::string& path) const { torch::save(*adamw_, path); }

void Optimizer::load(const std::string& path) { torch::load(*adamw_, path); }

}  // namespace hp::train
