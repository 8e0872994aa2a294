// The loss of a classification head on its labels, one definition for every stage that reads it (training, the
// criteria, the mask search, leave-one-out): a sequence head's logits [B, C] against labels [B] (a class index, or
// the score when C = 1, regression), and a token head's [B, S, C] against [B, S] tags, NaN at the positions no tag
// is scored on (special tokens, a word's later sub-tokens, padding).
#pragma once

#include <torch/types.h>

namespace hp::core {

// The loss of each example [B]: cross-entropy, or the squared error for regression; a token head's is the mean over
// the example's scored tokens (0 when it has none).
torch::Tensor per_example_loss(const torch::Tensor& logits, const torch::Tensor& labels, bool regression);

// The mean over the batch's labelled rows (a sequence head: NaN labels are rows the teacher alone labels) or scored
// tokens (a token head): Hugging Face's loss with ignore_index; 0 when nothing is labelled.
torch::Tensor labelled_loss(const torch::Tensor& logits, const torch::Tensor& labels, bool regression);

// The logit of each example's predicted class [B] (a score's own value for regression); a token head's summed over
// the tokens `labels` scores (not NaN): what LRP explains.
torch::Tensor predicted_logit(const torch::Tensor& logits, const torch::Tensor& labels);

// How many rows (a sequence head) or tokens (a token head) `labels` scores: its entries that are not NaN.
torch::Tensor labelled_count(const torch::Tensor& labels);

}  // namespace hp::core
