// AdamW groups, schedule and clipping (see train/optim.h).
#include "train/optim.h"

#include <torch/nn/utils/clip_grad.h>
#include <torch/optim.h>
#include <torch/serialize.h>
#include <torch/utils.h>
#include <torch/version.h>

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
  set_fused(fused_available() && !clip_params_.empty() && clip_params_.front().is_cuda());
}

// torch::optim::AdamW keys its state by the parameter's TensorImpl from LibTorch 2.x (a string of it in 1.13); ATen
// has _fused_adamw_ from 2.4 (CPU and CUDA).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define HP_FUSED_ADAMW 1
#endif

bool Optimizer::fused_available() {
#ifdef HP_FUSED_ADAMW
  return true;
#else
  return false;
#endif
}

void Optimizer::set_fused(bool on) {
  HP_CHECK(!on || fused_available(), "the fused AdamW needs LibTorch 2.4 or later");
  fused_ = on;
  fused_steps_.clear(), fused_lr_.clear();
}

torch::Tensor Optimizer::clip_and_norm() {
  std::vector<torch::Tensor> grads;
  for (const auto& p : clip_params_) grads.push_back(p.grad());
  // As torch::nn::utils::clip_grad_norm_: the norm of the parameters' norms, every gradient times
  // min(1, max / (norm + 1e-6)) — here without a per-parameter kernel, and without a host read.
  auto norm = torch::stack(at::_foreach_norm(grads, 2)).norm();
  if (cfg_.grad_clip > 0) at::_foreach_mul_(grads, torch::clamp_max(cfg_.grad_clip / (norm + 1e-6), 1.0));
  return norm;
}

void Optimizer::fused_adamw() {
#ifdef HP_FUSED_ADAMW
  auto& state = adamw_->state();
  auto& groups = adamw_->param_groups();
  const bool first = fused_steps_.empty();
  if (first) fused_steps_.resize(groups.size()), fused_lr_.resize(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(groups[g].options());
    std::vector<torch::Tensor> ps, grads, m, v;
    for (const auto& p : groups[g].params()) {
      auto it = state.find(p.unsafeGetTensorImpl());
      if (it == state.end()) {  // the first step: torch::optim::AdamW's own initial state
        auto st = std::make_unique<torch::optim::AdamWParamState>();
        st->step(0);
        st->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        st->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        it = state.emplace(p.unsafeGetTensorImpl(), std::move(st)).first;
      }
      auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
      st.step(st.step() + 1);
      ps.push_back(p), grads.push_back(p.grad()), m.push_back(st.exp_avg()), v.push_back(st.exp_avg_sq());
      if (first) fused_steps_[g].push_back(torch::full({}, static_cast<double>(st.step()), p.options()));
    }
    if (ps.empty()) continue;
    if (!first) at::_foreach_add_(fused_steps_[g], 1);
    const auto [beta1, beta2] = o.betas();
    if (first && ps.front().is_cuda())
      fused_lr_[g] = torch::full({}, o.lr(), ps.front().options().dtype(torch::kFloat));
    if (fused_lr_[g].defined())
      at::_fused_adamw_(ps, grads, m, v, {}, fused_steps_[g], fused_lr_[g], beta1, beta2, o.weight_decay(), o.eps(),
                        false, false);
    else
      at::_fused_adamw_(ps, grads, m, v, {}, fused_steps_[g], o.lr(), beta1, beta2, o.weight_decay(), o.eps(), false,
                        false);
  }
#else
  throw InternalError("train/optim.cpp: the fused AdamW needs LibTorch 2.4 or later");
#endif
}

void Optimizer::set_step(long step) {
  double m = linear_schedule(step, warmup_steps_, total_steps_);
  auto& groups = adamw_->param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    groups[g].options().set_lr(base_lr_[g] * m);
    if (g < fused_lr_.size() && fused_lr_[g].defined()) fused_lr_[g].fill_(base_lr_[g] * m);  // queued, not waited on
  }
  lr_ = cfg_.lr_peak * m;
}

void Optimizer::zero_grad() { adamw_->zero_grad(); }

torch::Tensor Optimizer::step() {
  // A parameter the loss did not reach this step (the layer-distillation map when no layer matched) steps with a
  // zero gradient, as it does after any earlier step (zero_grad keeps zeros) and in a data-parallel run (the
  // all-reduce fills every gradient). Skipping it only when no step gave it a gradient yet made the first step
  // after a resume differ from the uninterrupted run's.
  for (auto& group : adamw_->param_groups())
    for (auto& p : group.params())
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
  torch::NoGradGuard no_grad;
  if (fused_) {
    torch::Tensor norm = clip_params_.empty() ? torch::zeros({}) : clip_and_norm();
    fused_adamw();
    return norm;
  }
  double norm = 0;
  if (!clip_params_.empty()) {
    if (cfg_.grad_clip > 0) norm = torch::nn::utils::clip_grad_norm_(clip_params_, cfg_.grad_clip);
    else norm = grad_norm(clip_params_);
  }
  adamw_->step();
  return torch::tensor(norm, torch::kFloat64);
}

void Optimizer::set_step_count(long n) {
  // Every state is an AdamWParamState (both paths make them); the map's key type differs between LibTorch versions.
  for (auto& entry : adamw_->state()) static_cast<torch::optim::AdamWParamState&>(*entry.second).step(n);
}

void Optimizer::save(const std::string& path) const { torch::save(*adamw_, path); }

void Optimizer::load(const std::string& path) {
  fused_steps_.clear(), fused_lr_.clear();  // the fused path's step counts are made again from the loaded state
  // Onto the parameters' device: a state saved by a GPU run resumes on the CPU and the other way round.
  const auto& groups = adamw_->param_groups();
  for (const auto& g : groups)
    if (!g.params().empty()) return torch::load(*adamw_, path, g.params().front().device());
  torch::load(*adamw_, path);
}

}  // namespace hp::train
