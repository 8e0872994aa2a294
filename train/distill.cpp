// Distillation losses (see train/distill.h).
#include "train/distill.h"

#include <algorithm>
#include <limits>

#include "core/kernels/device.h"  // to_device

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
                           bool regression, const torch::Tensor& attention_mask) {
  if (student.dim() == 3) {  // a token head: KL at each real token, averaged over them
    TORCH_CHECK(student.sizes() == teacher.sizes() && attention_mask.defined(), "distill_loss: token logits ",
                student.sizes(), " and ", teacher.sizes(), " need the attention mask");
    const auto t = teacher.detach();
    const auto log_p_t = torch::log_softmax(t / temperature, 2), log_p_s = torch::log_softmax(student / temperature, 2);
    const auto w = attention_mask.to(student.device(), student.scalar_type());
    const auto kl = ((log_p_t.exp() * (log_p_t - log_p_s)).sum(2) * w).sum() / w.sum().clamp_min(1);
    return kl * (temperature * temperature);
  }
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
                                 const torch::Tensor& attention_mask, const torch::Tensor& alive,
                                 std::vector<int>* alignment, const std::function<void(torch::Tensor&)>& reduce) const {
  TORCH_CHECK(static_cast<int>(student.size()) == layers_ + 1 && teacher.size() == student.size(),
              "LayerDistill::loss: expected ", layers_ + 1, " hidden states, got ", student.size(), " and ",
              teacher.size());
  const torch::Device device = student[0].device();
  const torch::Tensor mask = attention_mask.to(device, torch::kFloat32).unsqueeze(-1);  // [B, S, 1]
  const int T = static_cast<int>(teacher_layers_.size());
  std::vector<torch::Tensor> mapped(layers_), matched(T);
  for (int l = 0; l < layers_; ++l)
    mapped[l] = torch::linear(student[l + 1], params_.at("distill_map.weight"), params_.at("distill_map.bias"));
  for (int t = 0; t < T; ++t) matched[t] = teacher[teacher_layers_[t] + 1].detach();
  // Squared errors of every mapped student layer against every matched teacher layer, summed over this rank's
  // real tokens, then the element count: data-parallel ranks add theirs so that the alignment and the mean are the
  // whole batch's. Only values (no graph): the matched pairs are taken again below with their gradient.
  torch::Tensor totals;
  {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> sse;
    for (int t = 0; t < T; ++t)
      for (int l = 0; l < layers_; ++l)
        sse.push_back(((mapped[l] - matched[t]).pow(2) * mask).sum().to(torch::kFloat64));
    sse.push_back(mask.sum().to(torch::kFloat64) * static_cast<double>(student[1].size(-1)));  // exact count
    totals = torch::stack(sse);
  }
  if (reduce) reduce(totals);
  const torch::Tensor count = totals[T * layers_].clamp_min(1.0).to(torch::kFloat32);
  const torch::Tensor errors = totals.narrow(0, 0, T * layers_).view({T, layers_});
  // From the last teacher layer down, the best student layer below the previous match (CoFi's ordering), on the
  // device: no host synchronisation in the training step. argmin takes the first of equal errors.
  const torch::Tensor layer = torch::arange(layers_, torch::TensorOptions().dtype(torch::kLong).device(device));
  // A fixed structure's mask comes from the host: copied without the host waiting.
  const torch::Tensor usable =
      alive.defined() ? core::to_device(alive, device).to(torch::kBool) : torch::ones_like(layer, torch::kBool);
  const double inf = std::numeric_limits<double>::infinity();
  torch::Tensor bound = torch::full({}, layers_, layer.options());
  std::vector<torch::Tensor> align(T);
  for (int t = T - 1; t >= 0; --t) {
    const torch::Tensor allowed = usable & (layer < bound);
    // None left: CoFi keeps the bound (the previous match again; no term when no layer is alive at all).
    align[t] = torch::where(allowed.any(), torch::where(allowed, errors[t], inf).argmin(), bound);
    bound = align[t];
  }
  // The matched pairs with their gradient, each pair's sum as above.
  torch::Tensor total = torch::zeros({}, mask.options());
  const torch::Tensor matches = torch::stack(align);
  if (device.is_cpu() && !gather_) {
    // On the CPU reading the matches costs nothing, and only the matched layers enter the graph.
    for (int t = 0; t < T; ++t)
      if (const long l = matches[t].item<long>(); l < layers_)
        total = total + ((mapped[l] - matched[t]).pow(2) * mask).sum() / count;
  } else {
    // On a GPU: one gather of the mapped layers (every layer's map then runs backward, with zeros where unmatched).
    const torch::Tensor picked = torch::stack(mapped).index_select(0, matches.clamp_max(layers_ - 1));  // [T, B, S, D]
    for (int t = 0; t < T; ++t) {
      const torch::Tensor term = ((picked[t] - matched[t]).pow(2) * mask).sum() / count;
      total = total + torch::where(align[t] < layers_, term, torch::zeros_like(term));
    }
  }
  if (alignment) {  // a host read, for tests and diagnostics only
    const torch::Tensor a = matches.cpu();
    alignment->assign(a.data_ptr<int64_t>(), a.data_ptr<int64_t>() + T);
  }
  return total;
}

torch::Tensor alive_layers(const torch::Tensor& head_mask, const torch::Tensor& layer_mask) {
  torch::Tensor alive;
  if (head_mask.defined()) {
    const torch::Tensor m = head_mask.dim() == 3 ? head_mask.abs().sum(0) : head_mask.abs();
    alive = m.sum(1) > 0;
  }
  if (layer_mask.defined()) alive = alive.defined() ? alive & (layer_mask != 0) : layer_mask != 0;
  return alive;
}

}  // namespace hp::train
