// The embedding objective: what a sentence-embedding model is pruned for is its embedding, not a task's
// logits. The teacher is the unpruned model; the student's pooled embedding e (core/model/pooling.h: the folder's
// pooling and Normalize) should stay where the teacher's was.
//
// - Recovery and the gates distil the teacher's embeddings of unlabelled sentences through the trainer
//   (train::Objective, train/trainer.h): the loss is the mean over the batch of ‖e_student − e_teacher‖², which for a
//   model ending in Normalize is 2·(1 − cosine).
// - The retraining-free search needs a Fisher (prune/search/mask_search.h), but at the teacher (every mask 1) that loss is
//   0 with a zero gradient. Its curvature there is the Gauss-Newton matrix Σ_b J_bᵀ J_b (J_b = ∂e_b/∂m), whose
//   diagonal the probe estimates without forming J: with v_b ~ N(0, I), g = ∂(Σ_b v_b · e_b)/∂m has
//   E_v[g²] = Σ_b ‖∂e_b/∂m‖² per mask entry — the Fisher of a Gaussian whose mean is the embedding. One backward per
//   batch, as for a task loss.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "core/model/bert.h"
#include "core/model/pooling_mode.h"

namespace hp::train {

// How a sentence-transformers folder pools its encoder's output (core/io/sentence_model.h's layout).
struct Pooling {
  core::SentencePooling modes;
  bool normalize = false;
};

// The pooled embedding [B, W] of an encoder's output on `in` (its last hidden state, every position computed).
torch::Tensor pooled(const core::EncoderOutput& out, const core::EncoderInput& in, const Pooling& pooling);

// The pooled embedding [B, W] of `model` on `in` (every position computed), differentiable.
torch::Tensor sentence_embedding(const core::Bert& model, const core::EncoderInput& in, const Pooling& pooling);

// The search's probe on a batch's embeddings [B, W]: (1 / B) Σ_b v_b · e_b, v [B, W] drawn N(0, 1) from `seed`
// (std::mt19937_64, the same numbers on every build and device).
torch::Tensor embedding_probe(const torch::Tensor& embeddings, uint64_t seed);

// The recovery's loss: the mean over the batch of ‖student_b − teacher_b‖²; the teacher's side carries no
// gradient.
torch::Tensor embedding_distill_loss(const torch::Tensor& student, const torch::Tensor& teacher);

// The recovery's optional layer-wise term (prune.distill_hidden): each layer's output of the student against the
// teacher's at the same depth — the slimmed model keeps every layer and the hidden width, so no map is learned, as
// TinyBERT matches equal widths —, the squared distance per real token divided by the width, averaged over the
// tokens (attention_mask [B, S]) and over the layers. `student` and `teacher` are EncoderOutput::hidden_states
// (L + 1 entries, the embeddings first, which are not matched); the teacher's side carries no gradient.
torch::Tensor hidden_distill_loss(const std::vector<torch::Tensor>& student, const std::vector<torch::Tensor>& teacher,
                                  const torch::Tensor& attention_mask);

}  // namespace hp::train
