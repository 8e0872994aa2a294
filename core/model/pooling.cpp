// Sentence pooling (see core/model/pooling.h). Each mode as sentence-transformers 2.7's models/Pooling.py computes it.
#include "core/model/pooling.h"

#include <vector>

namespace hp::core {

namespace {

// Mean (or sum / sqrt(count)) over the real tokens, each weighted by `weights` [B, S, 1].
torch::Tensor weighted_mean(const torch::Tensor& h, const torch::Tensor& weights, bool sqrt_len) {
  const auto sum = (h * weights).sum(1);
  const auto count = weights.sum(1).clamp_min(1e-9);
  return sum / (sqrt_len ? count.sqrt() : count);
}

}  // namespace

torch::Tensor pool_sentences(const SentencePooling& pooling, bool normalize, const torch::Tensor& hidden,
                             const torch::Tensor& mask) {
  TORCH_CHECK(hidden.dim() == 3 && mask.dim() == 2 && mask.size(0) == hidden.size(0) && mask.size(1) == hidden.size(1),
              "pool_sentences: hidden [B, S, D] and mask [B, S], got ", hidden.sizes(), " and ", mask.sizes());
  const auto h = hidden.to(torch::kFloat);
  const auto m = mask.to(h.device(), torch::kFloat).unsqueeze(-1);  // [B, S, 1]
  const long S = h.size(1);
  std::vector<torch::Tensor> parts;
  for (const PoolingMode mode : pooling.modes) {
    switch (mode) {
      case PoolingMode::kCls: parts.push_back(h.select(1, 0)); break;
      case PoolingMode::kMax: parts.push_back(h.masked_fill(m == 0, -1e9).amax(1)); break;
      case PoolingMode::kMean: parts.push_back(weighted_mean(h, m, false)); break;
      case PoolingMode::kMeanSqrtLen: parts.push_back(weighted_mean(h, m, true)); break;
      case PoolingMode::kWeightedMean: {
        const auto position = torch::arange(1, S + 1, h.options()).view({1, S, 1});  // 1, 2, ..., S
        parts.push_back(weighted_mean(h, m * position, false));
        break;
      }
      case PoolingMode::kLastToken: {
        // The last real token: the last position whose mask is 1 (position 0 when none is, as there).
        const auto flipped = mask.to(h.device(), torch::kLong).flip(1);
        const auto [value, index] = flipped.max(1);
        const auto last = (S - 1 - torch::where(value == 0, torch::full_like(index, S - 1), index)).view({-1, 1, 1});
        parts.push_back((h * m).gather(1, last.expand({h.size(0), 1, h.size(2)})).squeeze(1));
        break;
      }
    }
  }
  auto out = parts.size() == 1 ? parts.front() : torch::cat(parts, 1);
  // torch.nn.functional.normalize(p=2, dim=1): x / max(|x|, 1e-12).
  if (normalize) out = out / out.norm(2, 1, true).clamp_min(1e-12);
  return out;
}

}  // namespace hp::core
