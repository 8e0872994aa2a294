// Distillation losses (see train/distill.h).
#include "train/distill.h"

#include <algorithm>

namespace hp::train {

torch::Tensor distill_kl(const torch::Tensor& student, const torch::Tensor& teacher, double temperature) {
  // student, teacher: [B, C]
  TORCH_CHECK(student.sizes() == teacher.sizes(), "distill_kl: student logits ", student.sizes(),
              " and teacher logits ", teacher.sizes(), " differ");
  auto t = teacher.detach();
  auto log_p_t = torch::log_softmax(t / temperature, 1);
  auto log_p_s = torch::log_softmax(student / temperature, 1);
  // Σ_c p_t (log p_t − log p_s), averaged over B ("batchmean" in torch.nn.KLDivLoss).
  auto kl = (log_p_t.exp() * (log_p_t - log_p_s)).sum(1).mean();
  return kl * (temperature * temperature);
}

torch::Tensor distill_loss(const torch::Tensor& student, const torch::Tensor& teacher, double temperature,
                           bool regression) {
  if (regression) return torch::mse_loss(student, teacher.detach());
  return distill_kl(student, teacher, temperature);
}

LayerDistill::LayerDistill(int hidden, int layers) : layers_(layers) {
  if (layers < 4) {
    for (int l = 0; l < layers; ++l) teacher_layers_.push_back(l);
  } else {
    for (int k = 1; k <= 4; ++k) teacher_layers_.push_back(k * layers / 4 - 1);  // 12 layers: 2, 5, 8, 11
  }
  params_["distill_map.weight"] = torch::eye(hidden, torch::kFloat32).requires_grad_(true);
  params_["distill_map.bias"] = torch::zeros({hidden}, torch::kFloat32).requires_grad_(true);
}

void LayerDistill::to(const torch::Device& device) {
  for (auto& [name, t] : params_) t = t.detach().to(device).requires_grad_(true);
}

torch::Tensor LayerDistill::loss(const std::vector<torch::Tensor>& student, const std::vector<torch::Tensor>& teacher,
                                 const torch::Tensor& attention_mask, const std::vector<bool>& alive,
                                 std::vector<int>* alignment, const std::function<void(torch::Tensor&)>& reduce) const {
  TORCH_CHECK(static_cast<int>(student.size()) == layers_ + 1 && teacher.size() == student.size(),
              "LayerDistill::loss: expected ", layers_ + 1, " hidden states, got ", student.size(), " and ",
              teacher.size());
  const torch::Tensor mask = attention_mask.to(student[0].device(), torch::kFloat32).unsqueeze(-1);  // [B, S, 1]
  const int T = static_cast<int>(teacher_layers_.size());
  // Squared errors of every mapped student layer against every matched teacher layer, summed over this rank's
  // real tokens: [T][L]. Data-parallel ranks add theirs (and their token counts) so that the alignment and the
  // mean are the whole batch's.
  std::vector<std::vector<torch::Tensor>> sse(T);
  std::vector<torch::Tensor> mapped(layers_);
  for (int l = 0; l < layers_; ++l)
    mapped[l] = torch::linear(student[l + 1], params_.at("distill_map.weight"), params_.at("distill_map.bias"));
  for (int t = 0; t < T; ++t)
    for (int l = 0; l < layers_; ++l)
      sse[t].push_back(((mapped[l] - teacher[teacher_layers_[t] + 1].detach()).pow(2) * mask).sum());
  torch::Tensor totals = torch::zeros({T * layers_ + 1}, torch::kFloat64);  // the sums, then the element count
  for (int t = 0; t < T; ++t)
    for (int l = 0; l < layers_; ++l) totals[t * layers_ + l] = sse[t][l].item<double>();
  totals[T * layers_] = mask.sum().item<double>() * static_cast<double>(student[1].size(-1));
  if (reduce) reduce(totals);
  const double count = std::max(1.0, totals[T * layers_].item<double>());
  // From the last teacher layer down, the best student layer below the previous match (CoFi's ordering).
  std::vector<int> align(T);
  int bound = layers_;
  for (int t = T - 1; t >= 0; --t) {
    int best = -1;
    double top = 0;
    for (int l = 0; l < bound; ++l) {
      if (!alive.empty() && !alive[l]) continue;
      const double v = totals[t * layers_ + l].item<double>();
      if (best < 0 || v < top) best = l, top = v;
    }
    align[t] = best < 0 ? bound : best;  // none left: CoFi keeps the bound (no term)
    bound = align[t];
  }
  torch::Tensor total = torch::zeros({});
  for (int t = 0; t < T; ++t)
    if (align[t] < layers_) total = total + sse[t][align[t]] / count;
  if (alignment) *alignment = align;
  return total;
}

}  // namespace hp::train
