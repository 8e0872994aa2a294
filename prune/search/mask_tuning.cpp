// Mask tuning by layer-wise damped least squares (see prune/search/mask_tuning.h).
#include "prune/search/mask_tuning.h"
#include "prune/export/slim.h"  // copy_parameters

#include <cmath>
#include <torch/utils.h>

#include "core/base/errors.h"
#include "core/data/batching.h"

namespace hp::prune {

MaskScales unit_scales(const StructureKeep& keep) {
  auto tensor = [](const std::vector<std::vector<bool>>& k) {
    size_t width = 0;
    for (const auto& row : k) width = std::max(width, row.size());
    auto t = torch::zeros({static_cast<long>(k.size()), static_cast<long>(width)});
    for (size_t l = 0; l < k.size(); ++l)
      for (size_t u = 0; u < k[l].size(); ++u) t[l][u] = k[l][u] ? 1.0 : 0.0;
    return t;
  };
  return {tensor(keep.heads), tensor(keep.neurons)};
}

void LstsqSystem::add(const LstsqSystem& o) {
  ata = ata.defined() ? ata + o.ata : o.ata;
  atr = atr.defined() ? atr + o.atr : o.atr;
  rtr += o.rtr;
}

namespace {

torch::Tensor index_of(const std::vector<long>& v, const torch::Device& device = torch::kCPU) {
  return torch::tensor(v, torch::kLong).to(device);
}

}  // namespace

LstsqSystem attention_system(const torch::Tensor& ctx, const torch::Tensor& o_w, const torch::Tensor& residual,
                             const torch::Tensor& rows, const std::vector<long>& kept) {
  const auto K = static_cast<long>(kept.size()), D = o_w.size(0), Dh = ctx.size(3);
  const torch::Device device = ctx.device();  // the model's (a GPU's with run.device): the system comes back here
  const auto at = rows.to(device), units = index_of(kept, device);
  const auto r = residual.index({at}).to(torch::kFloat64);  // [T, D]
  // Column k of A: head kept[k]'s output-projection contribution at every selected row, [T, D] each.
  const auto c = ctx.index_select(1, units).permute({0, 2, 1, 3}).index({at}).to(torch::kFloat64);  // [T, K, Dh]
  const auto w = o_w.to(torch::kFloat64).view({D, -1, Dh}).index_select(1, units).permute({1, 2, 0});  // [K, Dh, D]
  const auto a = torch::einsum("tkd,kde->kte", {c, w}).reshape({K, -1});  // [K, T·D]
  return {a.mm(a.t()).cpu(), a.mv(r.reshape({-1})).cpu(), r.pow(2).sum().item<double>()};
}

LstsqSystem ffn_system(const torch::Tensor& acts, const torch::Tensor& w2, const torch::Tensor& residual,
                       const torch::Tensor& rows, const std::vector<long>& kept) {
  const torch::Device device = acts.device();
  const auto at = rows.to(device), units = index_of(kept, device);
  const auto r = residual.index({at}).to(torch::kFloat64);  // [T, D]
  const auto h = acts.index({at}).index_select(1, units).to(torch::kFloat64);  // [T, K]
  const auto w = w2.to(torch::kFloat64).index_select(1, units);  // [D, K]
  // Column i of A is act_i ⊗ W_2,i, so (AᵀA)_ij = (Σ_t act_ti act_tj)(W_2,i · W_2,j) and (Aᵀr)_i = Σ_t act_ti (W_2,i · r_t).
  return {(h.t().mm(h) * w.t().mm(w)).cpu(), (r.mm(w) * h).sum(0).cpu(), r.pow(2).sum().item<double>()};
}

torch::Tensor damped_lstsq(const LstsqSystem& s, double damping) {
  const auto K = s.ata.size(0);
  const double lambda = damping * s.ata.diagonal().mean().item<double>() + 1e-12;
  const auto eye = torch::eye(K, torch::kFloat64);
  return torch::linalg_solve(s.ata + lambda * eye, s.atr + lambda * torch::ones({K}, torch::kFloat64));
}

namespace {

std::vector<long> kept_units(const torch::Tensor& scales_row, long present) {
  std::vector<long> kept;
  for (long u = 0; u < present; ++u)
    if (scales_row[u].item<double>() != 0) kept.push_back(u);
  return kept;
}

// ‖A s − r‖² / ‖r‖² from the normal equations.
double relative_residual(const LstsqSystem& s, const torch::Tensor& x) {
  const double fit = x.dot(s.ata.mv(x)).item<double>() - 2 * x.dot(s.atr).item<double>() + s.rtr;
  return s.rtr > 0 ? std::max(fit, 0.0) / s.rtr : 0.0;
}

// Solves one sublayer's system into scales_row[kept] (left at their values when the solve is refused or fits no
// better than they do).
SublayerFit solve_into(const LstsqSystem& s, const std::vector<long>& kept, torch::Tensor scales_row,
                       const TuningOptions& opts, int layer, const char* block) {
  SublayerFit fit;
  fit.layer = layer, fit.block = block;
  const auto current = scales_row.index_select(0, index_of(kept)).to(torch::kFloat64);
  fit.before = fit.after = relative_residual(s, current);
  torch::Tensor x;
  try {
    x = damped_lstsq(s, opts.damping);
  } catch (const c10::Error& e) {
    fit.skipped = "the solve failed";
    return fit;
  }
  if (!torch::isfinite(x).all().item<bool>() || x.abs().max().item<double>() > opts.max_scale) {
    fit.skipped = "a scale outside ±" + std::to_string(opts.max_scale);
    return fit;
  }
  const double after = relative_residual(s, x);
  if (after > fit.before) return fit;  // no better than the scales it has (a residual already at round-off)
  scales_row.index_copy_(0, index_of(kept), x.to(scales_row.scalar_type()));
  fit.after = after;
  return fit;
}

// One layer of `model` on `x` with masks; contexts and FFN pieces recorded.
core::EncoderOutput run_layer(const core::Bert& model, const core::Batch& b, const torch::Tensor& x, int l,
                              const MaskScales* scales, const torch::Tensor& hidden = {}) {
  core::EncoderInput in = core::encoder_input(b);
  in.hidden_mask = hidden;
  in.start_layer = l;
  in.end_layer = l + 1;
  in.start_hidden = x;
  in.want_context = true;
  in.want_ffn = true;
  if (scales) {
    in.head_mask = scales->heads;
    in.neuron_mask = scales->neurons;
  }
  return model.forward(in);
}

// The rows a layer's fit counts: real tokens, or the [CLS] rows in the last layer of a classifier.
torch::Tensor fit_rows(const core::Batch& b, bool cls_only) {
  auto rows = b.attention_mask.to(torch::kBool).clone();
  if (cls_only) {
    rows.zero_();
    rows.select(1, 0).fill_(true);
  }
  return rows;
}

// Pre-LayerNorm values of the attention and FFN sublayers from a layer's recorded pieces.
torch::Tensor attention_pre_norm(const core::Bert& model, int l, const torch::Tensor& x, const core::EncoderOutput& o) {
  const auto& p = model.parameters();
  const std::string pre = "encoder.layer." + std::to_string(l) + ".attention.output.dense.";
  const auto& ctx = o.contexts[0];  // [B, H, S, Dh]
  const auto flat = ctx.transpose(1, 2).reshape({ctx.size(0), ctx.size(2), -1});
  return x + p.at(pre + "bias") + torch::matmul(flat, p.at(pre + "weight").t());
}

torch::Tensor ffn_pre_norm(const core::Bert& model, int l, const core::EncoderOutput& o) {
  const auto& p = model.parameters();
  const std::string pre = "encoder.layer." + std::to_string(l) + ".output.dense.";
  return o.ffn_inputs[0] + p.at(pre + "bias") + torch::matmul(o.ffn_acts[0], p.at(pre + "weight").t());
}

}  // namespace

MaskScales tune_masks(const core::Bert& model, const StructureKeep& keep, const RankData& sample,
                      const TuningOptions& opts, std::vector<SublayerFit>* fits,
                      const std::function<void(long, long)>& progress) {
  torch::NoGradGuard no_grad;
  const auto& cfg = model.config();
  const int L = cfg.num_hidden_layers;
  MaskScales scales = unit_scales(keep);
  const auto& batches = sample.batches;
  // Removed hidden channels: the student runs with them masked, and each fit counts the kept channels only
  // (the targets' and the projections' rows at the others are zeroed).
  torch::Tensor h;
  if (!keep.hidden.empty()) {
    h = torch::zeros({static_cast<long>(keep.hidden.size())});
    for (size_t c = 0; c < keep.hidden.size(); ++c) h[static_cast<long>(c)] = keep.hidden[c] ? 1.0 : 0.0;
    h = h.to(model.device());
  }
  auto rows_kept = [&](const torch::Tensor& t) { return h.defined() ? t * h.unsqueeze(1) : t; };  // [D, K]
  auto channels_kept = [&](const torch::Tensor& t) { return h.defined() ? t * h : t; };  // [.., D]
  std::vector<torch::Tensor> xs, xt;  // per batch: the student's and the teacher's input to the current layer
  for (const auto& b : batches) {
    core::EncoderInput in = core::encoder_input(b);
    xt.push_back(model.embed(in));
    in.hidden_mask = h;
    xs.push_back(model.embed(in));
  }
  const auto& p = model.parameters();
  for (int l = 0; l < L; ++l) {
    if (progress) progress(l, L);
    if (!core::layer_kept(keep.layers, static_cast<size_t>(l))) {  // gone: the student's input passes through
      for (size_t i = 0; i < batches.size(); ++i) xt[i] = run_layer(model, batches[i], xt[i], l, nullptr).last_hidden;
      continue;
    }
    const bool cls_only = opts.cls_last_layer && l == L - 1;
    const std::string layer = "encoder.layer." + std::to_string(l) + ".";
    const auto heads = kept_units(scales.heads[l], cfg.heads_in_layer(l));
    const auto neurons = kept_units(scales.neurons[l], cfg.ffn_width(l));
    std::vector<torch::Tensor> ffn_target(batches.size()), next_xt(batches.size());
    LstsqSystem attn;
    for (size_t i = 0; i < batches.size(); ++i) {
      const auto t = run_layer(model, batches[i], xt[i], l, nullptr);
      ffn_target[i] = ffn_pre_norm(model, l, t);
      next_xt[i] = t.last_hidden;
      if (heads.empty()) continue;
      const auto s = run_layer(model, batches[i], xs[i], l, &scales, h);
      const auto residual =
          attention_pre_norm(model, l, xt[i], t) - xs[i] - p.at(layer + "attention.output.dense.bias");
      attn.add(attention_system(s.contexts[0], rows_kept(p.at(layer + "attention.output.dense.weight")),
                                channels_kept(residual), fit_rows(batches[i], cls_only), heads));
    }
    if (!heads.empty()) {
      auto fit = solve_into(attn, heads, scales.heads[l], opts, l, "attention");
      if (fits) fits->push_back(fit);
    }
    LstsqSystem ffn;
    for (size_t i = 0; i < batches.size() && !neurons.empty(); ++i) {
      const auto s = run_layer(model, batches[i], xs[i], l, &scales, h);
      const auto residual = ffn_target[i] - s.ffn_inputs[0] - p.at(layer + "output.dense.bias");
      ffn.add(ffn_system(s.ffn_acts[0], rows_kept(p.at(layer + "output.dense.weight")), channels_kept(residual),
                         fit_rows(batches[i], cls_only), neurons));
    }
    if (!neurons.empty()) {
      auto fit = solve_into(ffn, neurons, scales.neurons[l], opts, l, "ffn");
      if (fits) fits->push_back(fit);
    }
    for (size_t i = 0; i < batches.size(); ++i)
      xs[i] = run_layer(model, batches[i], xs[i], l, &scales, h).last_hidden;
    xt = std::move(next_xt);
  }
  if (progress) progress(L, L);
  return scales;
}

core::Bert fold_scales(const core::Bert& model, const MaskScales& scales) {
  const auto& cfg = model.config();
  const long Dh = cfg.head_dim();
  std::map<std::string, torch::Tensor> params = copy_parameters(model);
  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    const std::string layer = "encoder.layer." + std::to_string(l) + ".";
    const long H = cfg.heads_in_layer(l), I = cfg.ffn_width(l);
    auto& o_w = params.at(layer + "attention.output.dense.weight");  // [D, H·Dh]
    o_w.mul_(scales.heads[l].narrow(0, 0, H).repeat_interleave(Dh).unsqueeze(0));
    auto& w2 = params.at(layer + "output.dense.weight");  // [D, I]
    w2.mul_(scales.neurons[l].narrow(0, 0, I).unsqueeze(0));
  }
  return core::Bert(cfg, std::move(params));
}

}  // namespace hp::prune
