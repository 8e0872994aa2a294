// Leave-one-out ("accuracy difference"): importance of head h = metric of the model minus metric with
// h alone removed, on the ranking data; for an embedding model 1 − the mean cosine of the embeddings with h
// removed to those with it (criteria.h). Ties in the (discrete) metric are broken by the change in mean
// loss, scaled far below one example's worth of metric (1e-6 · tanh Δloss), so the metric decides.
// Removing a head of layer l leaves layers below l unchanged: their outputs are computed once and each
// ablation starts at layer l (reuse_lower_layers; off = full forward, for the benchmark).
#include <cmath>
#include <torch/utils.h>

#include "core/dist/distributed.h"
#include "core/model/head_loss.h"
#include "core/base/errors.h"
#include "eval/evaluator.h"  // dataset_logits, put_rows, predictions_of
#include "eval/metrics.h"
#include "prune/heads/criteria.h"

namespace hp::prune {

namespace {

struct Score {
  double metric = 0, loss = 0;
};

// Metric and mean loss of the model on the ranking data; start_layer > 0 starts from cached inputs.
Score score(const CriterionContext& c, const torch::Tensor& mask, int start_layer,
            const std::vector<torch::Tensor>& cached) {
  const bool regression = c.rank->task->is_regression();
  const auto& data = *c.rank->data;
  const long n = static_cast<long>(data.size());
  torch::Tensor all;  // the logits in dataset order: [N, C], or a tagger's [N, S, C]
  double loss = 0;
  for (size_t i = 0; i < c.rank->batches.size(); ++i) {
    const auto& b = c.rank->batches[i];
    core::EncoderInput in = core::encoder_input(b);
    in.head_mask = mask;
    in.cls_only = true;
    if (start_layer > 0) {
      in.start_layer = start_layer;
      in.start_hidden = cached[i];
    }
    auto logits = c.model->forward(in).logits;
    loss += core::per_example_loss(logits, b.labels, regression).sum().item<double>();
    const bool tagged = logits.dim() == 3;
    if (!all.defined()) all = eval::dataset_logits(n, logits.size(-1), tagged ? core::longest_length(data) : 0);
    eval::put_rows(all, logits, b.index);
  }
  if (!all.defined()) all = torch::zeros({0, 1});
  const auto predictions = eval::predictions_of(all, data, regression);
  auto metrics = eval::compute_metrics(*c.rank->task, predictions, core::gold_labels(data));
  return {metrics.at(c.rank->task->primary_metric), loss / std::max<double>(static_cast<double>(n), 1)};
}

// An embedding model's pooled embeddings [N, W] of every ranking batch, in batch order (start_layer as above).
torch::Tensor embeddings(const CriterionContext& c, const torch::Tensor& mask, int start_layer,
                         const std::vector<torch::Tensor>& cached) {
  std::vector<torch::Tensor> parts;
  for (size_t i = 0; i < c.rank->batches.size(); ++i) {
    core::EncoderInput in = core::encoder_input(c.rank->batches[i]);
    in.head_mask = mask;
    if (start_layer > 0) {
      in.start_layer = start_layer;
      in.start_hidden = cached[i];
    }
    parts.push_back(train::pooled(c.model->forward(in), in, *c.embedding));
  }
  return torch::cat(parts, 0);
}

// The score of `mask` against the model under c.keep (`reference`: its embeddings, or its Score).
struct Reference {
  torch::Tensor embeddings;
  Score score;
};

double loo_value(const CriterionContext& c, const Reference& ref, const torch::Tensor& mask, int start_layer,
                 const std::vector<torch::Tensor>& cached) {
  if (c.embedding) {
    const auto e = embeddings(c, mask, start_layer, cached);
    return 1.0 - torch::cosine_similarity(e, ref.embeddings, 1).mean().item<double>();
  }
  const Score s = score(c, mask, start_layer, cached);
  return (ref.score.metric - s.metric) + 1e-6 * std::tanh(s.loss - ref.score.loss);
}

}  // namespace

torch::Tensor loo_importance(const CriterionContext& c) {
  HP_CHECK(c.model && c.rank && c.opts && c.keep.defined(), "criterion context incomplete");
  torch::NoGradGuard no_grad;
  const auto& cfg = c.model->config();
  const int L = cfg.num_hidden_layers;
  // Inputs of every layer for every batch (with the current mask), computed once.
  std::vector<std::vector<torch::Tensor>> hidden(L);  // [layer][batch]
  if (c.reuse_lower_layers) {
    for (const auto& b : c.rank->batches) {
      core::EncoderInput in = core::encoder_input(b);
      in.head_mask = c.keep;
      in.want_hidden = true;
      auto out = c.model->forward(in);
      for (int l = 0; l < L; ++l) hidden[l].push_back(out.hidden_states[l]);
    }
  }
  Reference ref;
  if (c.embedding) ref.embeddings = embeddings(c, c.keep, 0, {});
  else ref.score = score(c, c.keep, 0, {});
  auto imp = torch::zeros({L, cfg.max_heads()});
  const long present = static_cast<long>(c.keep.sum().item<double>());
  long heads_done = 0;
  for (int l = 0; l < L; ++l) {
    for (int h = 0; h < cfg.heads_in_layer(l); ++h) {
      if (c.keep[l][h].item<float>() == 0) continue;
      c.report(heads_done, present, "heads");
      if (!core::dist::mine(heads_done++)) continue;  // data-parallel: every world-th head
      auto mask = c.keep.clone();
      mask[l][h] = 0;
      const double v = c.reuse_lower_layers ? loo_value(c, ref, mask, l, hidden[l]) : loo_value(c, ref, mask, 0, {});
      imp[l][h] = static_cast<float>(v);
    }
  }
  core::dist::all_reduce_sum(imp, "the loo criterion");  // each head's value comes from one rank: exact
  return imp;
}

}  // namespace hp::prune
