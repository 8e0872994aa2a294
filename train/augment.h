// Data augmentation for distillation (TinyBERT, Jiao et al. 2020, §3.1): a distilled step sees some of its rows
// with words swapped for their nearest neighbours, and the teacher alone labels those rows (their task loss is left
// out; the KL and the layer term read them). A small task's few thousand examples are then a larger set of inputs
// on which the student learns the teacher's function, not only its labels.
//
// TinyBERT draws a word's candidates from BERT's masked-LM head or GloVe; a fine-tuned encoder has neither, so the
// candidates here are the k nearest whole words to it by cosine in the teacher's own input embeddings ("said":
// says, told, stated, …; "monday": tuesday, sunday, …). Only a whole word of letters (2 or more) is swapped, and
// only for another: a word split into pieces, a number or punctuation stays, so every row keeps its length and its
// word boundaries (a WordPiece continuation "##…", or a BPE/SentencePiece piece without its word-start marker, is
// never next to a swapped word).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "core/data/batching.h"  // Batch, EncodedDataset
#include "core/text/tokenizer.h"

namespace hp::train {

class WordSwap {
 public:
  // The neighbours of the swappable words that occur in `data`, from `word_embeddings` ([V, D]: the teacher's,
  // V = tok.vocab_size() or more) among all the vocabulary's swappable words. k >= 1.
  WordSwap(const core::Tokenizer& tok, const torch::Tensor& word_embeddings, const core::EncodedDataset& data,
           int k = 15);

  // `b` with each row, with probability 1/2, rewritten: each swappable word (one whose next piece starts a word,
  // or is a special) replaced with probability `p` by one of its k neighbours drawn uniformly. A row where a word
  // changed gets the label NaN: the teacher labels it. Deterministic in `seed`; `b` is unchanged.
  core::Batch apply(const core::Batch& b, double p, uint64_t seed) const;

  // The neighbours of `id`, nearest first (empty: not a swappable word of the data).
  const std::vector<int32_t>& neighbours(int32_t id) const;
  // Whether the piece `id` starts a word of letters that may be swapped (its vocabulary entry).
  bool swappable(int32_t id) const { return id >= 0 && id < static_cast<int32_t>(word_.size()) && word_[id]; }

 private:
  bool continues(int64_t id) const {  // a piece that continues the word before it
    return id >= 0 && id < static_cast<int64_t>(continuation_.size()) && continuation_[id];
  }
  std::vector<bool> word_;  // per vocabulary id: a swappable whole word
  std::vector<bool> continuation_;  // per vocabulary id: continues a word
  std::vector<std::vector<int32_t>> neighbours_;  // per vocabulary id; empty for most
};

// The other half of TinyBERT's answer for a small task: inputs the task has no labels for (prune.distill_tasks:
// other tasks' training rows, read by prune/data/distill_data.h distill_rows). `b` with as many rows of `pool` appended
// as it has (fewer when the pool is smaller), drawn without repeats from `seed`, each with the label NaN (the
// teacher alone labels it) and the index -1; the shorter part padded with `pad_id` to the longer one's length.
core::Batch with_unlabelled_rows(const core::Batch& b, const core::EncodedDataset& pool, uint64_t seed, int pad_id);

}  // namespace hp::train
