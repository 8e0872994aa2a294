// Encoding and padding (see core/data/batching.h).
#include "core/data/batching.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>

namespace hp::core {

double mean_length(const EncodedDataset& d) {
  double s = 0;
  for (const auto& ids : d.ids) s += static_cast<double>(ids.size());
  return d.size() ? s / static_cast<double>(d.size()) : 0;
}

int longest_length(const EncodedDataset& d) {
  size_t n = 0;
  for (const auto& ids : d.ids) n = std::max(n, ids.size());
  return static_cast<int>(n);
}

std::vector<int> length_buckets(int longest) {
  // Quarters bound the padding to a quarter of the longest length per batch with four graphs at most (each one
  // capture, a warm-up step and its own memory); multiples of 8 suit the GPU's matrix tiles. The top bucket is the
  // longest length itself, not rounded up, so that no batch grows past what the model's positions allow.
  std::vector<int> out;
  for (int k = 1; k < 4 && longest > 0; ++k) {
    const int b = (((longest * k + 3) / 4 + 7) / 8) * 8;
    if (b < longest && (out.empty() || out.back() != b)) out.push_back(b);
  }
  if (longest > 0) out.push_back(longest);
  return out;
}

namespace {

// A tagger's sentence: [CLS] the words' sub-tokens [SEP], the tag on each word's first sub-token.
void encode_words(const Tokenizer& tok, const Example& ex, int max_seq_len, EncodedDataset& out) {
  std::vector<int32_t> ids = {tok.cls_id()}, tags = {kUnscored};
  const size_t room = max_seq_len > 0 ? static_cast<size_t>(max_seq_len) - 1 : SIZE_MAX;  // [SEP] still to come
  const std::string space = tok.kind() == TokenizerKind::kByteLevelBpe ? " " : "";
  for (size_t w = 0; w < ex.words.size() && ids.size() < room; ++w) {
    const auto pieces = tok.tokenize_ids(space + ex.words[w]);
    for (size_t j = 0; j < pieces.size() && ids.size() < room; ++j) {
      ids.push_back(pieces[j]);
      tags.push_back(j == 0 && w < ex.tags.size() ? ex.tags[w] : kUnscored);
    }
  }
  ids.push_back(tok.sep_id());
  tags.push_back(kUnscored);
  out.type_ids.emplace_back(ids.size(), 0);
  out.ids.push_back(std::move(ids));
  out.tags.push_back(std::move(tags));
  out.labels.push_back(0);
}

}  // namespace

std::vector<float> gold_labels(const EncodedDataset& d) {
  if (d.tags.empty()) return d.labels;
  std::vector<float> out;
  for (const auto& row : d.tags) {
    for (int32_t t : row)
      if (t != kUnscored) out.push_back(static_cast<float>(t));
    out.push_back(kSentenceEnd);
  }
  return out;
}

EncodedDataset encode_examples(const Tokenizer& tok, const std::vector<Example>& examples, int max_seq_len) {
  EncodedDataset out;
  out.has_labels = !examples.empty() && examples.front().has_label;
  for (const auto& ex : examples) {
    if (!ex.words.empty()) {
      encode_words(tok, ex, max_seq_len, out);
      continue;
    }
    Encoding enc = tok.encode(ex.text_a, ex.text_b.empty() ? nullptr : &ex.text_b, max_seq_len);
    out.ids.push_back(std::move(enc.ids));
    out.type_ids.push_back(std::move(enc.type_ids));
    out.labels.push_back(ex.label);
  }
  return out;
}

std::vector<Batch> make_batches(const EncodedDataset& data, const BatchOptions& opts, std::vector<long> order) {
  if (order.empty()) {
    order.resize(data.size());
    std::iota(order.begin(), order.end(), 0L);
  }
  if (opts.sort_by_length)
    std::stable_sort(order.begin(), order.end(),
                     [&](long a, long b) { return data.ids[a].size() < data.ids[b].size(); });
  std::vector<Batch> batches;
  for (size_t start = 0; start < order.size(); start += opts.batch_size) {
    size_t end = std::min(order.size(), start + static_cast<size_t>(opts.batch_size));
    long B = static_cast<long>(end - start);
    long S = opts.pad_to;
    for (size_t i = start; i < end; ++i) S = std::max<long>(S, static_cast<long>(data.ids[order[i]].size()));
    const auto bucket = std::lower_bound(opts.length_buckets.begin(), opts.length_buckets.end(), S);
    if (bucket != opts.length_buckets.end()) S = *bucket;  // the smallest bucket that holds the batch
    Batch b;
    b.input_ids = torch::full({B, S}, opts.pad_id, torch::kLong);
    b.token_type_ids = torch::zeros({B, S}, torch::kLong);
    b.attention_mask = torch::zeros({B, S}, torch::kLong);
    const bool tagged = !data.tags.empty();
    b.labels = tagged ? torch::full({B, S}, std::numeric_limits<float>::quiet_NaN()) : torch::empty({B}, torch::kFloat32);
    auto ids = b.input_ids.accessor<int64_t, 2>();
    auto types = b.token_type_ids.accessor<int64_t, 2>();
    auto mask = b.attention_mask.accessor<int64_t, 2>();
    for (long r = 0; r < B; ++r) {
      long idx = order[start + r];
      const auto& seq = data.ids[idx];
      for (size_t t = 0; t < seq.size(); ++t) {
        ids[r][t] = seq[t];
        types[r][t] = data.type_ids[idx][t];
        mask[r][t] = 1;
      }
      float* row = b.labels.data_ptr<float>() + (tagged ? r * S : r);  // contiguous, as made above
      if (!tagged) *row = data.labels[idx];
      for (size_t t = 0; tagged && t < seq.size(); ++t)
        if (data.tags[idx][t] != kUnscored) row[t] = static_cast<float>(data.tags[idx][t]);
      b.index.push_back(idx);
    }
    batches.push_back(std::move(b));
  }
  return batches;
}

EncoderInput encoder_input(const Batch& b) {
  EncoderInput in;
  in.input_ids = b.input_ids;
  in.token_type_ids = b.token_type_ids;
  in.attention_mask = b.attention_mask;
  return in;
}

}  // namespace hp::core
