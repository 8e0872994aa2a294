// Attention attribution (Hao et al. 2021): integrated gradients of the target's probability with
// respect to layer l's attention probabilities A, along the straight path α·A, α from 0 to 1:
//   Attr_h(A) = A_h ⊙ (1/m) Σ_k ∂F(α_k A)/∂A_h,   importance_h = E_x max_ij Attr_h(A)_ij.
// Only layer l's attention is scaled; the other layers compute theirs as usual. For each batch the
// unscaled forward runs once; for each layer the m scaled copies form one batch that starts from the
// cached input of layer l (the layers below do not depend on α).
#include <algorithm>
#include <limits>
#include <torch/utils.h>
#include <torch/autograd.h>

#include "core/dist/distributed.h"
#include "core/base/errors.h"
#include "prune/heads/criteria.h"

namespace hp::prune {

namespace {

// Tokens (examples × steps × sequence length) per forward + backward pass. Small passes keep each
// layer's activations in cache: on the SST-2 bench (24 tokens, m = 20) passes of 1,000–3,000 tokens
// took 11.5 s, 7,700 tokens 16 s and 15,000 tokens 25 s. It also bounds memory.
constexpr long kMaxTokensPerPass = 2048;

// Rows [from, from + n) of a batch, cut to their longest real length `len`, repeated `copies` times.
core::EncoderInput repeat_input(const core::Batch& b, long from, long n, long len, long copies) {
  auto rep = [&](const torch::Tensor& t) { return t.narrow(0, from, n).narrow(1, 0, len).repeat({copies, 1}); };
  core::EncoderInput in;
  in.input_ids = rep(b.input_ids);
  in.token_type_ids = rep(b.token_type_ids);
  in.attention_mask = rep(b.attention_mask);
  return in;
}

}  // namespace

torch::Tensor attention_attribution(const core::Bert& model, const core::Batch& b, const torch::Tensor& keep,
                                    const core::EncoderOutput& base, int layer, const torch::Tensor& target,
                                    const std::vector<double>& alphas, bool reuse_lower_layers,
                                    const train::Pooling* embedding) {
  const long B = b.input_ids.size(0), S = b.input_ids.size(1), m = static_cast<long>(alphas.size());
  const auto H = base.attentions[layer].size(1);
  const bool regression = model.config().num_labels == 1;
  const long longest = b.attention_mask.sum(1).max().item<long>();
  const long chunk = std::max<long>(1, kMaxTokensPerPass / (m * std::max<long>(longest, 1)));
  std::vector<torch::Tensor> parts;
  for (long from = 0; from < B; from += chunk) {
    const long n = std::min(chunk, B - from);
    // Padding beyond the chunk's longest example gets exactly zero attention: leave it out.
    const long len = b.attention_mask.narrow(0, from, n).sum(1).max().item<long>();
    auto A = base.attentions[layer].narrow(0, from, n).narrow(2, 0, len).narrow(3, 0, len);  // [n, H, len, len]
    std::vector<torch::Tensor> steps;
    for (double a : alphas) steps.push_back(A * a);
    auto scaled = torch::cat(steps, 0).requires_grad_(true);  // [m·n, H, len, len], step-major
    core::EncoderInput in = repeat_input(b, from, n, len, m);
    in.head_mask = keep;
    in.override_layer = layer;
    in.override_probs = scaled;
    in.cls_only = !embedding;  // an embedding pools every position
    if (reuse_lower_layers) {
      in.start_layer = layer;
      in.start_hidden = base.hidden_states[layer].narrow(0, from, n).narrow(1, 0, len).repeat({m, 1, 1});
    }
    const auto out = model.forward(in);
    const auto& logits = out.logits;  // [m·n, C]
    torch::Tensor f;
    if (embedding) {  // the cosine to the unscaled embedding (criteria.h)
      const auto e = train::pooled(out, in, *embedding);
      f = torch::cosine_similarity(e, target.narrow(0, from, n).repeat({m, 1}).to(e.device()), 1);
    } else if (regression) f = logits.select(1, 0);
    else
      f = torch::softmax(logits, 1)
              .gather(1, target.narrow(0, from, n).repeat({m}).unsqueeze(1).to(logits.device()))
              .squeeze(1);
    auto grad = torch::autograd::grad({f.sum()}, {scaled})[0].view({m, n, H, len, len}).sum(0);
    auto attr = torch::zeros({n, H, S, S}, A.options());  // on the model's device
    attr.narrow(2, 0, len).narrow(3, 0, len).copy_(A * grad / static_cast<double>(m));
    parts.push_back(attr);
  }
  return torch::cat(parts, 0);
}

core::EncoderOutput attribution_base(const core::Bert& model, const core::Batch& b, const torch::Tensor& keep) {
  torch::NoGradGuard no_grad;
  core::EncoderInput in = core::encoder_input(b);
  in.head_mask = keep;
  in.want_attention = true;
  in.want_hidden = true;
  return model.forward(in);
}

torch::Tensor attattr_importance(const CriterionContext& c) {
  HP_CHECK(c.model && c.rank && c.opts && c.keep.defined(), "criterion context incomplete");
  const auto& cfg = c.model->config();
  const int L = cfg.num_hidden_layers;
  const bool gold = c.opts->attattr_target == "gold";
  if (!gold && c.opts->attattr_target != "predicted")
    throw ConfigError("prune.attattr_target = '" + c.opts->attattr_target + "'; use gold or predicted");
  const std::vector<double> alphas = riemann_alphas(c.opts->attattr_steps, c.opts->attattr_riemann);
  auto total = torch::zeros({L, cfg.max_heads()}, torch::kFloat64);
  c.for_my_batches([&](const core::Batch& b) {
    const core::EncoderOutput base = attribution_base(*c.model, b, c.keep);
    torch::Tensor target;
    if (c.embedding) target = train::pooled(base, core::encoder_input(b), *c.embedding);
    else target = gold && cfg.num_labels > 1 ? b.labels.to(torch::kLong) : base.logits.argmax(1);
    // Max over real (query, key) pairs only: padding entries are not attention the model paid.
    auto real = b.attention_mask.to(torch::kBool);
    auto pair = (real.unsqueeze(2) & real.unsqueeze(1)).unsqueeze(1);  // [B, 1, S, S]
    for (int l = 0; l < L; ++l) {
      const auto H = base.attentions[l].size(1);
      if (H == 0 || c.keep[l].narrow(0, 0, H).sum().item<double>() == 0) continue;
      auto attr =
          attention_attribution(*c.model, b, c.keep, base, l, target, alphas, c.reuse_lower_layers, c.embedding);
      auto masked = attr.masked_fill(~pair.to(attr.device()), -std::numeric_limits<float>::infinity());
      total[l].narrow(0, 0, H) += std::get<0>(masked.flatten(2).max(-1)).sum(0).to(torch::kCPU, torch::kFloat64);
    }
  });
  core::dist::all_reduce_sum(total, "the attattr criterion");
  return (total / std::max<long>(c.rank->examples(), 1)).to(torch::kFloat32);
}

}  // namespace hp::prune
