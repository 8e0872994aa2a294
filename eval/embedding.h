// Sentence embeddings of a sentence-transformers model (#59): the encoder (core/model/bert.h) and the folder's
// pooling (core/model/pooling.h), batch by batch, as SentenceTransformer(path).encode(texts) computes them.
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

#include "core/io/sentence_model.h"
#include "core/model/bert.h"
#include "core/text/tokenizer.h"

namespace hp::eval {

// The sentence-transformers model of `dir`: its layout, its encoder (on the CPU; no classifier is needed and none is
// reported) and its tokenizer. InputError when `dir` is no sentence-transformers folder or its pooling does not fit
// the encoder.
struct SentenceEncoder {
  core::SentenceModel layout;
  core::Bert model;
  core::Tokenizer tokenizer;
};
SentenceEncoder load_sentence_encoder(const std::string& dir);

// The sequence length the folder's encode() uses: max_seq_length, or `max_len` when it is > 0, capped by the
// encoder's max_position_embeddings.
int embedding_length(const SentenceEncoder& enc, int max_len);

// [N, width] float32 embeddings of `texts` in their order, `batch` at a time (progress on stderr when
// `show_progress`), under no gradient at the model's precision.
torch::Tensor embed_texts(const SentenceEncoder& enc, const std::vector<std::string>& texts, int batch, int max_len,
                          bool show_progress);

}  // namespace hp::eval
