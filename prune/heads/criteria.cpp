// The criteria table and the gradient- and attention-based criteria (see prune/heads/criteria.h).
// Attention attribution: prune/heads/attattr.cpp. Leave-one-out: prune/heads/ablation.cpp.
#include "prune/heads/criteria.h"

#include "core/model/head_loss.h"
#include "prune/heads/criterion_names.h"

#include <algorithm>
#include <filesystem>
#include <random>
#include <torch/utils.h>
#include <torch/autograd.h>

#include "core/dist/distributed.h"
#include "core/base/errors.h"
#include "core/io/tensor_io.h"  // read_safetensors

namespace hp::prune {

namespace {

// The model input of a batch with one differentiable copy of the keep mask per example: [B, L, H].
core::EncoderInput gated_input(const core::Batch& b, const torch::Tensor& keep, torch::Tensor& gates) {
  gates = keep.unsqueeze(0).expand({b.input_ids.size(0), keep.size(0), keep.size(1)}).clone().requires_grad_(true);
  core::EncoderInput in = core::encoder_input(b);
  in.head_mask = gates;
  return in;
}

void check_context(const CriterionContext& c) {
  HP_CHECK(c.model && c.rank && c.opts && c.keep.defined(), "criterion context incomplete");
  for (const auto& [name, t] : c.model->parameters())
    HP_CHECK(!t.requires_grad(), "criteria need a model without trainable tensors (" << name << ")");
}

// Taylor for an embedding model: Σ_b ‖∂e_b/∂ξ_{b,l,h}‖ [L, H], one backward per embedding dimension (example b's
// embedding depends on its own gates only, so each backward gives every example's column at once).
torch::Tensor embedding_jacobian_norms(const CriterionContext& c, const core::EncoderOutput& out,
                                       const core::EncoderInput& in, const torch::Tensor& gates) {
  const auto e = train::pooled(out, in, *c.embedding);
  auto squares = torch::zeros_like(gates);
  for (int64_t d = 0; d < e.size(1); ++d)
    squares += torch::autograd::grad({e.select(1, d).sum()}, {gates}, {}, /*retain_graph=*/true)[0].pow(2);
  return squares.sqrt().sum(0).to(torch::kFloat64);
}

// LRP's source for an embedding model: f_b = u_b · sg(u_b), u the embedding before Normalize (see criteria.h).
torch::Tensor embedding_relevance_source(const CriterionContext& c, const core::EncoderOutput& out,
                                         const core::EncoderInput& in) {
  const auto u = train::pooled(out, in, {c.embedding->modes, false});
  return (u * u.detach()).sum(1);
}

}  // namespace

RankData make_rank_data(const core::TaskSpec& task, const core::EncodedDataset& data, int batch_size, int pad_id) {
  RankData r;
  r.task = &task;
  r.data = &data;
  core::BatchOptions bo;
  bo.batch_size = batch_size;
  bo.sort_by_length = true;
  bo.pad_id = pad_id;
  r.batches = core::make_batches(data, bo);
  return r;
}

torch::Tensor normalize_per_layer(const torch::Tensor& importance) {
  auto norm = importance.pow(2).sum(1, true).sqrt();
  return torch::where(norm > 0, importance / norm, importance);
}

std::vector<double> riemann_alphas(int steps, const std::string& rule) {
  std::vector<double> a;
  for (int k = 1; k <= steps; ++k) {
    if (rule == "right") a.push_back(static_cast<double>(k) / steps);
    else if (rule == "left") a.push_back(static_cast<double>(k - 1) / steps);
    else if (rule == "midpoint") a.push_back((k - 0.5) / steps);
    else throw ConfigError("prune.attattr_riemann = '" + rule + "'; use right, left or midpoint");
  }
  return a;
}

torch::Tensor confidence_importance(const CriterionContext& c) {
  check_context(c);
  torch::NoGradGuard no_grad;
  const auto& cfg = c.model->config();
  auto sum = torch::zeros({cfg.num_hidden_layers, cfg.max_heads()}, torch::kFloat64);
  double tokens = 0;
  c.for_my_batches([&](const core::Batch& b) {
    core::EncoderInput in = core::encoder_input(b);
    in.head_mask = c.keep;
    in.want_attention = true;
    auto out = c.model->forward(in);
    tokens += b.attention_mask.sum().item<double>();
    sum += confidence_sums(out.attentions, b.attention_mask, cfg.max_heads());
  });
  auto tok = torch::full({1}, tokens, torch::kFloat64);
  core::dist::all_reduce_sum(sum, "the confidence criterion");
  core::dist::all_reduce_sum(tok, "the confidence criterion");
  return (sum / std::max(tok.item<double>(), 1.0)).to(torch::kFloat32);
}

torch::Tensor confidence_sums(const std::vector<torch::Tensor>& attentions, const torch::Tensor& attention_mask,
                              int64_t max_heads) {
  auto sum = torch::zeros({static_cast<int64_t>(attentions.size()), max_heads}, torch::kFloat64);
  torch::Tensor real;  // [B, 1, S] query tokens that count, on the model's device
  for (size_t l = 0; l < attentions.size(); ++l) {
    const auto H = attentions[l].size(1);
    if (H == 0) continue;
    auto top = std::get<0>(attentions[l].detach().max(-1)).to(torch::kFloat64);  // [B, H, S]
    if (!real.defined()) real = attention_mask.to(top.device(), torch::kFloat64).unsqueeze(1);
    sum[l].narrow(0, 0, H) += (top * real).sum(torch::IntArrayRef{0, 2}).to(torch::kCPU);
  }
  return sum;
}

torch::Tensor taylor_importance(const CriterionContext& c) {
  check_context(c);
  const bool regression = !c.embedding && c.rank->task->is_regression();
  const auto& cfg = c.model->config();
  auto total = torch::zeros({cfg.num_hidden_layers, cfg.max_heads()}, torch::kFloat64);
  c.for_my_batches([&](const core::Batch& b) {
    torch::Tensor gates;
    core::EncoderInput in = gated_input(b, c.keep, gates);
    in.want_context = c.opts->taylor_token_level && !c.embedding;
    in.cls_only = !in.want_context && !c.embedding;  // an embedding pools every position
    if (in.want_context) {  // every layer's contexts must take gradients, layer 0's included
      torch::NoGradGuard no_grad;
      in.start_hidden = c.model->embed(in);
    }
    if (in.want_context) in.start_hidden.requires_grad_(true);
    auto out = c.model->forward(in);
    if (c.embedding) {
      total += embedding_jacobian_norms(c, out, in, gates);
      return;
    }
    // Example i's loss depends on gates[i] only, so one backward of the sum gives every ∂L_i/∂ξ.
    auto loss = core::per_example_loss(out.logits, b.labels, regression).sum();
    if (!c.opts->taylor_token_level) {
      auto g = torch::autograd::grad({loss}, {gates})[0];  // [B, L, H]
      total += g.abs().sum(0).to(torch::kFloat64);
      return;
    }
    // Per token: the head's share of ∂L/∂ξ at each position, |Σ_d ctx · ∂L/∂ctx|, summed over tokens.
    auto grads = torch::autograd::grad({loss}, out.contexts);
    auto real = b.attention_mask.to(out.logits.device(), torch::kFloat32).unsqueeze(1);  // [B, 1, S]
    for (int l = 0; l < cfg.num_hidden_layers; ++l) {
      const auto H = out.contexts[l].size(1);
      if (H == 0) continue;
      auto share = (out.contexts[l] * grads[l]).sum(-1).abs() * real;  // [B, H, S]
      total[l].narrow(0, 0, H) += share.sum(torch::IntArrayRef{0, 2}).to(torch::kCPU, torch::kFloat64);
    }
  });
  core::dist::all_reduce_sum(total, "the taylor criterion");
  auto imp = (total / std::max<long>(c.rank->examples(), 1)).to(torch::kFloat32);
  return c.opts->normalize_layers ? normalize_per_layer(imp) : imp;
}

torch::Tensor lrp_importance(const CriterionContext& c) {
  check_context(c);
  const auto& cfg = c.model->config();
  auto total = torch::zeros({cfg.num_hidden_layers, cfg.max_heads()}, torch::kFloat64);
  c.for_my_batches([&](const core::Batch& b) {
    torch::Tensor gates;
    core::EncoderInput in = gated_input(b, c.keep, gates);
    in.lrp_rules = true;
    in.cls_only = !c.embedding;
    const auto out = c.model->forward(in);
    torch::Tensor top;
    if (c.embedding) top = embedding_relevance_source(c, out, in);
    else top = core::predicted_logit(out.logits, b.labels);
    // Relevance of head h = Σ over its neurons of output × gradient = ξ_h · ∂f/∂ξ_h (ξ is the gate).
    auto rel = (torch::autograd::grad({top.sum()}, {gates})[0] * gates.detach()).to(torch::kFloat64);  // [B, L, H]
    auto layer_total = rel.abs().sum(-1, true).clamp_min(1e-30);
    total += (rel / layer_total).sum(0);
  });
  core::dist::all_reduce_sum(total, "the lrp criterion");
  return (total / std::max<long>(c.rank->examples(), 1)).to(torch::kFloat32);
}

torch::Tensor random_importance(const CriterionContext& c) {
  const auto& cfg = c.model->config();
  std::mt19937_64 gen(static_cast<uint64_t>(c.seed) * 0x9E3779B97F4A7C15ULL + 17);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto imp = torch::zeros({cfg.num_hidden_layers, cfg.max_heads()});
  auto a = imp.accessor<float, 2>();
  for (int l = 0; l < cfg.num_hidden_layers; ++l)
    for (int h = 0; h < cfg.max_heads(); ++h) a[l][h] = static_cast<float>(u(gen));
  return imp;
}

torch::Tensor gates_log_alpha(const std::string& run_dir) {
  const std::string path = run_dir + "/best/gates.safetensors";
  if (run_dir.empty())
    throw ConfigError(
        "prune.gates_run is empty; the gates criterion needs a gated `prune train --gates` run directory");
  if (!std::filesystem::exists(path))
    throw InputError(path + ": not found; prune.gates_run must be a run of `prune train --gates` (or --target-heads)");
  auto tensors = core::read_safetensors(path);
  if (!tensors.count("log_alpha")) throw InputError(path + ": no log_alpha tensor; re-run the gated training");
  return tensors.at("log_alpha").to(torch::kFloat32);
}

namespace {

torch::Tensor gates_importance(const CriterionContext& c) {
  auto la = gates_log_alpha(c.opts->gates_run);
  const auto& cfg = c.model->config();
  if (la.size(0) != cfg.num_hidden_layers || la.size(1) != cfg.max_heads())
    throw InputError(c.opts->gates_run + "/best/gates.safetensors: log_alpha is [" + std::to_string(la.size(0)) + ", " +
                     std::to_string(la.size(1)) + "] but the model has " + std::to_string(cfg.num_hidden_layers) +
                     " x " + std::to_string(cfg.max_heads()) + " heads; use a gated run of this model");
  return la;
}

}  // namespace

const std::vector<Criterion>& criterion_table() {
  static const std::vector<Criterion> table = {
      {"confidence", "Voita et al. 2019", confidence_importance},
      {"lrp", "Voita et al. 2019 (LRP, Ding et al. 2017)", lrp_importance},
      {"taylor", "Michel et al. 2019", taylor_importance},
      {"attattr", "Hao et al. 2021", attattr_importance},
      {"random", "baseline", random_importance},
      {"loo", "single-head ablation (Michel et al. 2019)", loo_importance},
      {"gates", "Hard-Concrete gates (Voita et al. 2019)", gates_importance, true},
  };
  return table;
}

const Criterion& find_criterion(const std::string& name, const std::string& key) {
  std::vector<std::string> names;
  for (const auto& c : criterion_table()) {
    if (name == c.name) return c;
    names.push_back(c.name);
  }
  const std::string near = core::nearest_key(name, names);
  throw ConfigError(key + ": unknown criterion '" + name + "'" + (near.empty() ? "" : " (did you mean " + near + "?)") +
                    "; use one of " + core::join_list(names));
}

bool criterion_reads_gated_run(const std::string& name) {
  const auto& t = criterion_table();
  return std::any_of(t.begin(), t.end(), [&](const Criterion& c) { return c.reads_gated_run && name == c.name; });
}

const Criterion& check_criterion(const std::string& name, const core::PruneConfig& p, const std::string& key) {
  const Criterion& c = find_criterion(name, key);
  if (c.reads_gated_run) gates_log_alpha(p.gates_run);
  return c;
}

}  // namespace hp::prune
