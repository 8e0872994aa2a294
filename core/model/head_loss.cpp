// Loss of a classification head (see core/model/head_loss.h).
#include "core/model/head_loss.h"

namespace hp::core {

namespace {

// Cross-entropy of every token [B, S] of a token head's logits, 0 where the tag is NaN, and the 0/1 weights.
std::pair<torch::Tensor, torch::Tensor> token_losses(const torch::Tensor& logits, const torch::Tensor& labels) {
  const auto y = labels.to(logits.device());
  const torch::Tensor known = y.isnan().logical_not();
  const torch::Tensor tags = torch::where(known, y, torch::zeros_like(y)).to(torch::kLong);
  const auto each = at::cross_entropy_loss(logits.flatten(0, 1), tags.flatten(), {}, at::Reduction::None);
  const auto w = known.to(each.scalar_type());
  return {each.view_as(tags) * w, w};
}

}  // namespace

torch::Tensor per_example_loss(const torch::Tensor& logits, const torch::Tensor& labels, bool regression) {
  if (logits.dim() == 3) {
    const auto [each, w] = token_losses(logits, labels);
    return each.sum(1) / w.sum(1).clamp_min(1);
  }
  if (regression) return (logits.select(1, 0) - labels.to(logits.device())).pow(2);
  return at::cross_entropy_loss(logits, labels.to(logits.device(), torch::kLong), /*weight=*/{}, at::Reduction::None);
}

torch::Tensor labelled_loss(const torch::Tensor& logits, const torch::Tensor& labels, bool regression) {
  if (logits.dim() == 3) {
    const auto [each, w] = token_losses(logits, labels);
    return each.sum() / w.sum().clamp_min(1);
  }
  const torch::Tensor known = labels.isnan().logical_not();
  const torch::Tensor y = torch::where(known, labels, torch::zeros_like(labels));
  const torch::Tensor each = regression
                                 ? (logits.select(1, 0) - y).pow(2)
                                 : torch::cross_entropy_loss(logits, y.to(torch::kLong), {}, at::Reduction::None);
  const torch::Tensor w = known.to(each.scalar_type());
  return (each * w).sum() / w.sum().clamp_min(1);
}

torch::Tensor predicted_logit(const torch::Tensor& logits, const torch::Tensor& labels) {
  if (logits.dim() == 3) {
    const auto scored = labels.to(logits.device()).isnan().logical_not().to(logits.scalar_type());
    return (logits.gather(2, logits.argmax(2, true)).squeeze(2) * scored).sum(1);
  }
  if (logits.size(1) == 1) return logits.select(1, 0);
  return logits.gather(1, logits.argmax(1, true)).squeeze(1);
}

torch::Tensor labelled_count(const torch::Tensor& labels) { return labels.isnan().logical_not().sum(); }

}  // namespace hp::core
