// Knowledge distillation from a frozen teacher (Hinton et al. 2015): the KL divergence between
// temperature-softened distributions, scaled by T² so its gradients keep their size as T changes.
// Used by the fixed-heads fine-tuning of target mode (train/trainer.h).
#pragma once

#include <torch/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace hp::train {

// T² · mean over the batch of KL(softmax(teacher/T) || softmax(student/T)).
// student, teacher: [B, C] logits; returns a scalar (differentiable in `student` only).
torch::Tensor distill_kl(const torch::Tensor& student, const torch::Tensor& teacher, double temperature);

// The distillation term for a task: distill_kl for classification; for regression (C = 1, where a
// softmax is constant) the mean squared difference of the two outputs; for a token head's [B, S, C] logits the
// KL at every real token of `attention_mask` [B, S] (required there), averaged over those tokens.
torch::Tensor distill_loss(const torch::Tensor& student, const torch::Tensor& teacher, double temperature,
                           bool regression, const torch::Tensor& attention_mask = {});

// CoFi's layer-wise distillation (Xia, Zhong, Chen 2022, §3.3, their "layer_distill_version 4"): a set of the
// teacher's layers T (4 spread layers, the last among them: 2, 5, 8, 11 of 12; all of them below 4 layers) is
// each matched to a student layer by the smallest MSE(W h_s + b, h_t), searched from the last teacher layer down,
// each match below the previous one and in a layer whose attention sublayer still has a head; the loss is the
// sum of the matched MSEs. W, b (a learned D × D map, initialised to the identity: the student starts as a copy
// of the teacher) train with the model. Hidden states are every layer's output, padding excluded from the mean.
// Per layer ([L] bool, on the masks' device, no host read): does its attention sublayer keep a head under `head_mask`
// ([L, H] or [B, L, H]; undefined = all), and is the layer itself there under `layer_mask` ([L]; undefined = all)?
// Undefined when both are: LayerDistill::loss's `alive`.
torch::Tensor alive_layers(const torch::Tensor& head_mask, const torch::Tensor& layer_mask);

class LayerDistill {
 public:
  LayerDistill(int hidden, int layers);

  // The teacher layers matched (0-based layer indices).
  const std::vector<int>& teacher_layers() const { return teacher_layers_; }
  // student, teacher: hidden_states of EncoderOutput (L + 1 entries, the embeddings first; [B, S, D] each, all
  // rows); attention_mask [B, S]; `alive` ([L] bool, undefined = all): layer l's attention sublayer keeps a head
  // (nothing else is matched). `alignment` (optional; a host read) receives the student layer matched to each teacher
  // layer (the previous match where none is left below it; L when no layer is alive). Data-parallel: `reduce` sums a
  // float64 tensor over the ranks, so that every rank aligns by the whole batch's errors and divides by its token
  // count; each rank's result is then its share of the whole batch's loss (sum them, as the gradients are summed).
  torch::Tensor loss(const std::vector<torch::Tensor>& student, const std::vector<torch::Tensor>& teacher,
                     const torch::Tensor& attention_mask, const torch::Tensor& alive,
                     std::vector<int>* alignment = nullptr,
                     const std::function<void(torch::Tensor&)>& reduce = {}) const;

  // The map's tensors, "distill_map.weight" [D, D] and "distill_map.bias" [D] (requires_grad).
  const std::map<std::string, torch::Tensor>& parameters() const { return params_; }
  // Moves the map to the student's device (before an optimizer holds its tensors).
  void to(const torch::Device& device);
  // Takes the matched layers as a GPU does (a gather on the device, no host read) on the CPU too (tests).
  void gather_on_device(bool on) { gather_ = on; }

 private:
  std::vector<int> teacher_layers_;
  int layers_;
  std::map<std::string, torch::Tensor> params_;
  bool gather_ = false;
};

}  // namespace hp::train
