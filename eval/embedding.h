// Sentence embeddings of a sentence-transformers model: the encoder (core/model/bert.h) and the folder's
// pooling (core/model/pooling.h), batch by batch, as SentenceTransformer(path).encode(texts) computes them.
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

#include "core/data/glue.h"
#include "core/io/checkpoint.h"
#include "core/io/sentence_model.h"
#include "core/model/bert.h"
#include "core/text/tokenizer.h"
#include "eval/evaluator.h"  // Masks

namespace hp::eval {

// The sentence-transformers model of `dir`: its layout, its encoder (on the CPU; no classifier is needed and none is
// reported) and its tokenizer. InputError when `dir` is no sentence-transformers folder or its pooling does not fit
// the encoder.
struct SentenceEncoder {
  core::SentenceModel layout;
  core::Bert model;
  core::Tokenizer tokenizer;
};
// `load` and `report` as core::load_bert takes them (whether the folder holds a classifier for a task).
SentenceEncoder load_sentence_encoder(const std::string& dir, const core::LoadOptions& load = {},
                                      core::LoadReport* report = nullptr);

// The sequence length the folder's encode() uses: max_seq_length, or `max_len` when it is > 0, capped by the
// encoder's max_position_embeddings.
int embedding_length(const SentenceEncoder& enc, int max_len);

// `texts` tokenized as embed_texts runs them (the folder's default prompt first, one segment each, cut at
// embedding_length), in their order.
core::EncodedDataset encode_texts(const SentenceEncoder& enc, const std::vector<std::string>& texts, int max_len);
// The same of the rows' text_a (single sentences), their line numbers kept.
core::EncodedDataset encode_sentences(const SentenceEncoder& enc, std::vector<core::Example> rows, int max_len);

// [N, width] float32 embeddings (on the CPU) of `texts` in their order, `batch` at a time (progress on stderr when
// `show_progress`), under no gradient at the model's precision, on the model's device, with `masks` on the encoder.
torch::Tensor embed_texts(const SentenceEncoder& enc, const std::vector<std::string>& texts, int batch, int max_len,
                          bool show_progress, const Masks& masks = {});

// Row i of a against row i of b: [N, D] x [N, D] -> [N] cosine similarities (sentence-transformers' pairwise_cos_sim;
// a zero row gives 0).
torch::Tensor paired_cosine(const torch::Tensor& a, const torch::Tensor& b);

// Semantic textual similarity as MTEB scores it: the cosine similarity of each pair's two embeddings against
// its gold score, nothing trained on the labels. Metrics, as fractions like compute_metrics' (eval/metrics.h):
// cosine_spearman (the primary one) and cosine_pearson.
struct StsResult {
  std::map<std::string, double> metrics;
  std::vector<float> similarities;  // one per pair, in the pairs' order
  torch::Tensor embeddings;  // [2N, width]: every pair's first sentences, then their second ones
  long pairs = 0;
  double seconds = 0;
  double pairs_per_s = 0;
};
// pairs: labelled sentence pairs (text_a, text_b, label = the gold similarity); both sentences of every pair are
// embedded in one pass of embed_texts (sts_texts' order).
std::vector<std::string> sts_texts(const std::vector<core::Example>& pairs);
StsResult evaluate_sts(const SentenceEncoder& enc, const std::vector<core::Example>& pairs, int batch, int max_len,
                       const Masks& masks = {}, bool show_progress = false);
// The same scores from embeddings made elsewhere (ONNX Runtime's): [2N, width] in sts_texts' order.
StsResult sts_of_embeddings(const std::vector<core::Example>& pairs, const torch::Tensor& embeddings);

}  // namespace hp::eval
