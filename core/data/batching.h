// Encoded datasets and padded batches. Evaluation sorts examples by length and pads each batch only
// to its longest member (dynamic padding); results are scattered back to the original order.
#pragma once

#include <torch/types.h>

#include <vector>

#include "core/model/bert.h"  // EncoderInput
#include "core/data/glue.h"  // Example
#include "core/text/tokenizer.h"  // Tokenizer

namespace hp::core {

struct EncodedDataset {
  std::vector<std::vector<int32_t>> ids;  // N × [S_i], with [CLS]/[SEP]
  std::vector<std::vector<int32_t>> type_ids;  // N × [S_i]
  std::vector<float> labels;  // N (class index or score); a tagger's: 0
  // A tagger's data: N × [S_i], each token's tag (an index into TaskSpec::labels) on a word's first sub-token and
  // kUnscored on the others and the specials (Hugging Face run_ner.py's label_all_tokens = False). Empty otherwise.
  std::vector<std::vector<int32_t>> tags;
  bool has_labels = false;
  size_t size() const { return ids.size(); }
};

// Mean real length (tokens) of an encoded dataset; 0 when empty.
double mean_length(const EncodedDataset& d);

// A token that carries no tag (EncodedDataset::tags).
inline constexpr int32_t kUnscored = -1;

// Each example encoded as the tokenizer encodes its text pair; a tagger's sentences (Example::words) word by word
// as Hugging Face encodes is_split_into_words input (a byte-level BPE word with its leading space), the tag on each
// word's first sub-token, words past max_seq_len dropped.
EncodedDataset encode_examples(const Tokenizer& tok, const std::vector<Example>& examples, int max_seq_len);

// The gold labels the metrics read, in dataset order: `labels`, or a tagger's scored tags token by token, each
// sentence followed by kSentenceEnd (core/data/glue.h).
std::vector<float> gold_labels(const EncodedDataset& d);

struct Batch {
  torch::Tensor input_ids;  // [B, S] int64
  torch::Tensor token_type_ids;  // [B, S] int64
  torch::Tensor attention_mask;  // [B, S] int64
  torch::Tensor labels;  // [B] float32; a tagger's [B, S], NaN at the tokens without a tag
  std::vector<long> index;  // B positions in the dataset
};

struct BatchOptions {
  int batch_size = 32;
  bool sort_by_length = true;  // group similar lengths (evaluation); false keeps dataset order
  int pad_to = 0;  // > 0: pad every batch to this length instead of its longest member
  // Ascending lengths (length_buckets()); non-empty: pad each batch to the smallest one >= its longest member (and
  // >= pad_to), so that batches come in a few shapes (a captured CUDA graph each); a longer batch keeps its length.
  std::vector<int> length_buckets;
  int pad_id = 0;
};

// The length buckets of a split whose longest example has `longest` tokens: a quarter, half and three quarters of
// it rounded up to a multiple of 8, then `longest` itself; ascending, without repeats.
std::vector<int> length_buckets(int longest);

// The longest example's length (tokens); 0 when empty.
int longest_length(const EncodedDataset& d);

// Batches of `order` (dataset positions; empty = all in order).
std::vector<Batch> make_batches(const EncodedDataset& data, const BatchOptions& opts, std::vector<long> order = {});

// The model input of a batch (no head mask, no optional outputs).
EncoderInput encoder_input(const Batch& b);

}  // namespace hp::core
