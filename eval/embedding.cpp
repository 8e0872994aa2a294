// Sentence embeddings (see eval/embedding.h).
#include "eval/embedding.h"

#include <algorithm>
#include <chrono>

#include "core/base/errors.h"
#include "core/base/log.h"
#include "core/data/batching.h"
#include "core/io/checkpoint.h"
#include "core/model/pooling.h"
#include "eval/metrics.h"

namespace hp::eval {

SentenceEncoder load_sentence_encoder(const std::string& dir, const core::LoadOptions& load, core::LoadReport* report) {
  if (!core::is_sentence_model(dir))
    throw InputError(dir + ": no modules.json, so not a sentence-transformers folder; prune embed reads one such as "
                     "checkpoints/all-MiniLM-L6-v2 (Transformer, Pooling, Normalize)");
  core::SentenceModel layout = core::read_sentence_model(dir);
  core::Bert model = core::load_bert(layout.transformer_dir, load, report);
  const int hidden = model.config().hidden_size;
  if (layout.pooling.dimension != hidden)
    throw InputError(dir + ": the Pooling module's word_embedding_dimension is " +
                     std::to_string(layout.pooling.dimension) + " but the encoder's hidden size is " +
                     std::to_string(hidden) + "; the two belong together (re-export the folder)");
  core::Tokenizer tok = core::Tokenizer::from_model_dir(layout.transformer_dir);  // the Transformer module's own
  tok.set_lowercase_input(layout.do_lower_case);  // as sentence-transformers' Transformer module lowers the texts
  return {std::move(layout), std::move(model), std::move(tok)};
}

int embedding_length(const SentenceEncoder& enc, int max_len) {
  const int want = max_len > 0 ? max_len : enc.layout.max_seq_length > 0 ? enc.layout.max_seq_length : 512;
  return std::min(want, enc.model.config().max_position_embeddings);
}

core::EncodedDataset encode_sentences(const SentenceEncoder& enc, std::vector<core::Example> rows, int max_len) {
  for (auto& r : rows) r.text_a = enc.layout.prompt + r.text_a;  // the folder's default prompt, as encode() puts it
  return core::encode_examples(enc.tokenizer, rows, embedding_length(enc, max_len));
}

core::EncodedDataset encode_texts(const SentenceEncoder& enc, const std::vector<std::string>& texts, int max_len) {
  std::vector<core::Example> examples(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) examples[i].text_a = texts[i], examples[i].line = static_cast<int>(i + 1);
  return encode_sentences(enc, std::move(examples), max_len);
}

torch::Tensor embed_texts(const SentenceEncoder& enc, const std::vector<std::string>& texts, int batch, int max_len,
                          bool show_progress, const Masks& masks) {
  const auto data = encode_texts(enc, texts, max_len);
  core::BatchOptions bo;
  bo.batch_size = batch;
  bo.pad_id = enc.tokenizer.pad_id();
  const long N = static_cast<long>(texts.size());
  auto out = torch::zeros({N, enc.layout.embedding_width()});
  torch::NoGradGuard no_grad;
  core::Progress progress("embed", N);
  long done = 0;
  for (const auto& b : core::make_batches(data, bo)) {
    core::EncoderInput in = core::encoder_input(b);
    set_masks(in, masks);
    const auto hidden = enc.model.forward(in).last_hidden;
    const auto e = core::pool_sentences(enc.layout.pooling, enc.layout.normalize, hidden,
                                        b.attention_mask.to(hidden.device()));
    out.index_copy_(0, torch::tensor(b.index, torch::kLong), e.to(torch::kCPU));
    done += b.input_ids.size(0);
    if (show_progress) progress.update(done);
  }
  if (show_progress) progress.finish();
  return out;
}

torch::Tensor paired_cosine(const torch::Tensor& a, const torch::Tensor& b) {
  HP_CHECK(a.dim() == 2 && a.sizes() == b.sizes(), "paired_cosine: " << a.sizes() << " vs " << b.sizes());
  const auto norms = (a.norm(2, 1) * b.norm(2, 1)).clamp_min(1e-12);
  return (a * b).sum(1) / norms;
}

std::vector<std::string> sts_texts(const std::vector<core::Example>& pairs) {
  std::vector<std::string> texts;
  texts.reserve(2 * pairs.size());
  for (const auto& p : pairs) texts.push_back(p.text_a);
  for (const auto& p : pairs) texts.push_back(p.text_b);
  return texts;
}

StsResult sts_of_embeddings(const std::vector<core::Example>& pairs, const torch::Tensor& e) {
  const long N = static_cast<long>(pairs.size());
  HP_CHECK(e.dim() == 2 && e.size(0) == 2 * N, "sts_of_embeddings: " << e.sizes() << " for " << N << " pairs");
  const auto cos = paired_cosine(e.slice(0, 0, N), e.slice(0, N, 2 * N)).to(torch::kDouble).contiguous();
  StsResult r;
  r.pairs = N;
  r.embeddings = e;
  std::vector<double> sim(cos.data_ptr<double>(), cos.data_ptr<double>() + N), gold;
  for (const auto& p : pairs) gold.push_back(p.label);
  r.similarities.assign(sim.begin(), sim.end());
  r.metrics["cosine_spearman"] = spearman(sim, gold);
  r.metrics["cosine_pearson"] = pearson(sim, gold);
  return r;
}

StsResult evaluate_sts(const SentenceEncoder& enc, const std::vector<core::Example>& pairs, int batch, int max_len,
                       const Masks& masks, bool show_progress) {
  const auto t0 = std::chrono::steady_clock::now();
  StsResult r = sts_of_embeddings(pairs, embed_texts(enc, sts_texts(pairs), batch, max_len, show_progress, masks));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.pairs_per_s = r.seconds > 0 ? r.pairs / r.seconds : 0;
  return r;
}

}  // namespace hp::eval
