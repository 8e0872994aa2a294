// Sentence embeddings (see eval/embedding.h).
#include "eval/embedding.h"

#include <algorithm>

#include "core/base/errors.h"
#include "core/base/log.h"
#include "core/data/batching.h"
#include "core/io/checkpoint.h"
#include "core/model/pooling.h"

namespace hp::eval {

SentenceEncoder load_sentence_encoder(const std::string& dir) {
  if (!core::is_sentence_model(dir))
    throw InputError(dir + ": no modules.json, so not a sentence-transformers folder; prune embed reads one such as "
                     "checkpoints/all-MiniLM-L6-v2 (Transformer, Pooling, Normalize)");
  core::SentenceModel layout = core::read_sentence_model(dir);
  core::Bert model = core::load_bert(layout.transformer_dir);
  const int hidden = model.config().hidden_size;
  if (layout.pooling.dimension != hidden)
    throw InputError(dir + ": the Pooling module's word_embedding_dimension is " +
                     std::to_string(layout.pooling.dimension) + " but the encoder's hidden size is " +
                     std::to_string(hidden) + "; the two belong together (re-export the folder)");
  return {std::move(layout), std::move(model), core::Tokenizer::from_model_dir(dir)};
}

int embedding_length(const SentenceEncoder& enc, int max_len) {
  const int want = max_len > 0 ? max_len : enc.layout.max_seq_length > 0 ? enc.layout.max_seq_length : 512;
  return std::min(want, enc.model.config().max_position_embeddings);
}

torch::Tensor embed_texts(const SentenceEncoder& enc, const std::vector<std::string>& texts, int batch, int max_len,
                          bool show_progress) {
  std::vector<core::Example> examples(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) examples[i].text_a = texts[i], examples[i].line = static_cast<int>(i + 1);
  const auto data = core::encode_examples(enc.tokenizer, examples, embedding_length(enc, max_len));
  core::BatchOptions bo;
  bo.batch_size = batch;
  bo.pad_id = enc.tokenizer.pad_id();
  const long N = static_cast<long>(texts.size());
  auto out = torch::zeros({N, enc.layout.embedding_width()});
  torch::NoGradGuard no_grad;
  core::Progress progress("embed", N);
  long done = 0;
  for (const auto& b : core::make_batches(data, bo)) {
    const auto hidden = enc.model.forward(core::encoder_input(b)).last_hidden;
    const auto e = core::pool_sentences(enc.layout.pooling, enc.layout.normalize, hidden, b.attention_mask);
    out.index_copy_(0, torch::tensor(b.index, torch::kLong), e.to(torch::kCPU));
    done += b.input_ids.size(0);
    if (show_progress) progress.update(done);
  }
  if (show_progress) progress.finish();
  return out;
}

}  // namespace hp::eval
