// Head importance criteria. Each scores every head of a (possibly partly masked) model on ranking
// data and returns an importance matrix [L, Hmax]: higher = more important. Masked heads (keep = 0)
// get NaN-free values but are never ranked (prune/heads/schedule.h skips them).
//
//   confidence  Voita et al. 2019: mean over real query tokens of the head's largest attention weight.
//               Padding is excluded as query and never attended; [CLS] and [SEP] count as ordinary
//               tokens (both as queries and as attended keys), as in Voita's definition.
//   lrp         Voita et al. 2019 / Ding et al. 2017: relevance of the predicted class's logit, propagated
//               to each head's output, summed over the head's neurons, normalised over the heads of the
//               layer (R_h / Σ_h' |R_h'|) per example, averaged. Rules (core/model/bert.h lrp_rules):
//               linear layers LRP-0 (z-rule: R_i = Σ_j x_i w_ij / z_j · R_j; biases keep their share),
//               attention: the weights are constants, relevance flows through the values only (AH rule);
//               LayerNorm: centring is linear, 1/σ is a constant (LN rule); GELU and the pooler's tanh:
//               act(x) = x · (act(x)/x) with the ratio constant. Under these rules the network is linear
//               in the hidden state, so LRP-0 equals input × gradient and is conserved exactly when the
//               biases are zero (tested); with biases, the biases absorb their share.
//   taylor      Michel et al. 2019: I_h = Σ_x |∂L(x)/∂ξ_h| / N with ξ the head mask and L the gold
//               label's loss, per example (default) or per token (the |gradient| of each token's share,
//               Michel's code variant); optional per-layer L2 normalisation (default on).
//   attattr     Hao et al. 2021: integrated gradients of the target's probability over layer l's attention
//               probabilities A, scaled α·A from 0 to 1 (other layers unchanged), m Riemann steps;
//               importance = mean over examples of max_ij Attr_h(A)_ij. The m steps are one batch and the
//               layers below l are computed once.
//   random      uniform random scores from the seed (a baseline).
//   loo         leave-one-out: metric of the model minus metric with only that head removed (the
//               "accuracy difference" baseline); lower layers' activations are reused.
//   gates       log α of a gated `prune train` run (prune.gates_run): more open = more important.
//
// For a sentence-embedding model (CriterionContext::embedding) there is no classifier: each criterion's loss or
// target is the pooled embedding's (train/embedding_objective.h), on unlabelled sentences —
//   taylor      the embedding itself: I_h = Σ_b ‖∂e_b/∂ξ_h‖₂ / N, the first-order change of the embedding (after
//               Normalize, if the folder has it) when the head's mask moves — one backward per embedding dimension
//               (Michel's |∂L/∂ξ| has no loss to take here: the distance to the teacher is 0 at the teacher); per
//               token (taylor_token_level) is refused;
//   lrp         the pooled embedding before Normalize, u, explaining itself: relevance u_d · u_d at the output
//               (f = u · sg(u); Normalize's output has constant length, so it would explain nothing);
//   attattr     the cosine of the embedding at α·A to the unscaled forward's embedding (1 at α = 1);
//   loo         1 − the mean cosine of the embeddings with the head removed to those with it present;
//   confidence and random read no loss and are as above; gates are refused (use --method gates).
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "core/data/batching.h"
#include "core/dist/distributed.h"  // mine
#include "core/model/bert.h"
#include "core/base/config.h"  // PruneConfig
#include "core/data/glue.h"
#include "train/embedding_objective.h"  // Pooling

namespace hp::prune {

// The data a criterion scores on: encoded ranking examples in fixed batches.
struct RankData {
  const core::TaskSpec* task = nullptr;
  const core::EncodedDataset* data = nullptr;
  std::vector<core::Batch> batches;
  long examples() const {
    long n = 0;
    for (const auto& b : batches) n += b.input_ids.size(0);
    return n;
  }
};

RankData make_rank_data(const core::TaskSpec& task, const core::EncodedDataset& data, int batch_size, int pad_id);

struct CriterionContext {
  const core::Bert* model = nullptr;
  const RankData* rank = nullptr;
  torch::Tensor keep;  // [L, Hmax] 1 = head present, 0 = already pruned
  const core::PruneConfig* opts = nullptr;
  int seed = 42;
  bool reuse_lower_layers = true;  // loo/attattr: compute the layers below once (benchmarks turn it off)
  // Set for a sentence-embedding model: the criteria read its pooled embedding, not logits (see above).
  const train::Pooling* embedding = nullptr;
  // Told as work finishes: `done` of `total` units ("batches", "heads"); may be empty.
  std::function<void(long done, long total, const std::string& unit)> progress;
  void report(long done, long total, const std::string& unit) const {
    if (progress) progress(done, total, unit);
  }
  // f(batch) on this rank's share of the ranking batches (every world-th one, data-parallel), progress told per batch.
  template <typename F>
  void for_my_batches(const F& f) const {
    const long n = static_cast<long>(rank->batches.size());
    for (long i = 0; i < n; ++i) {
      report(i, n, "batches");
      if (core::dist::mine(i)) f(rank->batches[static_cast<size_t>(i)]);
    }
  }
};

using CriterionFn = torch::Tensor (*)(const CriterionContext&);

struct Criterion {
  const char* name;
  const char* source;  // paper
  CriterionFn score;
  bool reads_gated_run = false;  // scores from prune.gates_run's gates: a classifier's gated run, checked before work
};

// Every criterion, in plot order.
const std::vector<Criterion>& criterion_table();

// The named criterion; ConfigError naming `key`, the known names and the nearest one otherwise.
const Criterion& find_criterion(const std::string& name, const std::string& key = "prune.criteria");
// find_criterion, and for one that reads a gated run, that run's gates read (InputError naming it when missing), so
// that a run fails before any work.
const Criterion& check_criterion(const std::string& name, const core::PruneConfig& p,
                                 const std::string& key = "prune.criteria");

// Individual criteria (exposed for tests and benchmarks).
torch::Tensor confidence_importance(const CriterionContext& c);
// Voita's confidence summed over a batch: Σ over real query tokens of each head's largest attention
// weight, [L, max_heads] float64 (divide by the real tokens for the criterion). attentions: L × [B, H_l,
// S, S]; attention_mask: [B, S]. Also used by `prune analyze` (analysis/attention_pass.cpp).
torch::Tensor confidence_sums(const std::vector<torch::Tensor>& attentions, const torch::Tensor& attention_mask,
                              int64_t max_heads);
torch::Tensor lrp_importance(const CriterionContext& c);
torch::Tensor taylor_importance(const CriterionContext& c);
torch::Tensor attattr_importance(const CriterionContext& c);
torch::Tensor random_importance(const CriterionContext& c);
torch::Tensor loo_importance(const CriterionContext& c);

// Attention attribution pieces (prune/heads/attattr.cpp), exposed for tests: the unscaled forward of a batch
// (attentions and hidden states), and Attr(A) [B, H, S, S] of one layer for targets [B] (class index;
// ignored for regression; with `embedding`, the unscaled embeddings [B, W] whose cosine is the target) at the
// Riemann points `alphas`.
core::EncoderOutput attribution_base(const core::Bert& model, const core::Batch& b, const torch::Tensor& keep);
torch::Tensor attention_attribution(const core::Bert& model, const core::Batch& b, const torch::Tensor& keep,
                                    const core::EncoderOutput& base, int layer, const torch::Tensor& target,
                                    const std::vector<double>& alphas, bool reuse_lower_layers,
                                    const train::Pooling* embedding = nullptr);

// Reads log α [L, H] from a gated run directory (its run.h5 / state). InputError naming the path.
torch::Tensor gates_log_alpha(const std::string& run_dir);


// Divides each layer's row by its L2 norm (rows of zeros stay zero).
torch::Tensor normalize_per_layer(const torch::Tensor& importance);

// Riemann points α_k of integrated gradients for m steps: right k/m (k=1..m), left (k-1)/m, midpoint.
std::vector<double> riemann_alphas(int steps, const std::string& rule);

}  // namespace hp::prune
