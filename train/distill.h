// Knowledge distillation from a frozen teacher (Hinton et al. 2015): the KL divergence between
// temperature-softened distributions, scaled by T² so its gradients keep their size as T changes.
// Used by the fixed-heads fine-tuning of target mode (train/trainer.h).
#pragma once

#include <torch/torch.h>

namespace hp::train {

// T² · mean over the batch of KL(softmax(teacher/T) || softmax(student/T)).
// student, teacher: [B, C] logits; returns a scalar (differentiable in `student` only).
torch::Tensor distill_kl(const torch::Tensor& student, const torch::Tensor& teacher, double temperature);

// The distillation term for a task: distill_kl for classification; for regression (C = 1, where a
// softmax is constant) the mean squared difference of the two outputs.
torch::Tensor distill_loss(const torch::Tensor& student, const torch::Tensor& teacher, double temperature,
                           bool regression);

}  // namespace hp::train
