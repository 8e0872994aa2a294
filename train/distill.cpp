// Distillation losses (see train/distill.h).
#include "train/distill.h"

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

}  // namespace hp::train
