// Sentence embeddings as sentence-transformers' Pooling and Normalize modules make them (core/model/pooling_mode.h, read by core/io/sentence_model.h):
// from the encoder's last hidden states and the attention mask, each pooling mode of the folder in its order,
// concatenated, then scaled to unit L2 norm when the folder lists Normalize. Differentiable (the embedding
// objective trains through it).
#pragma once

#include <torch/types.h>

#include "core/model/pooling_mode.h"

namespace hp::core {

// hidden: [B, S, D] (every position); mask: [B, S] 0/1 -> [B, modes·D] float32.
torch::Tensor pool_sentences(const SentencePooling& pooling, bool normalize, const torch::Tensor& hidden,
                             const torch::Tensor& mask);

}  // namespace hp::core
