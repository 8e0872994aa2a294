#include "train/augment.h"

#include <torch/types.h>
#include <torch/utils.h>  // NoGradGuard

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>  // iota
#include <random>
#include <string_view>

#include "core/base/errors.h"

namespace hp::train {

namespace {

// How a vocabulary entry sits in a word: the marker a word's first piece carries (BPE's "Ġ", SentencePiece's "▁") or
// the one a continuation carries (WordPiece's "##").
struct Piece {
  bool starts = false;  // begins a word
  std::string_view text;  // without its marker
};

Piece piece_of(core::TokenizerKind kind, std::string_view s) {
  auto strip = [&](std::string_view marker) {
    const bool has = s.substr(0, marker.size()) == marker;
    return std::pair{has, has ? s.substr(marker.size()) : s};
  };
  switch (kind) {
    case core::TokenizerKind::kWordPiece: {
      const auto [cont, text] = strip("##");
      return {!cont, text};
    }
    case core::TokenizerKind::kByteLevelBpe: {
      const auto [start, text] = strip("\xC4\xA0");  // Ġ
      return {start, text};
    }
    case core::TokenizerKind::kSentencePiece: {
      const auto [start, text] = strip("\xE2\x96\x81");  // ▁
      return {start, text};
    }
  }
  return {};
}

bool letters(std::string_view s) {
  return s.size() >= 2 &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; });
}

}  // namespace

WordSwap::WordSwap(const core::Tokenizer& tok, const torch::Tensor& word_embeddings, const core::EncodedDataset& data,
                   int k) {
  if (k < 1) throw ConfigError("WordSwap: k = " + std::to_string(k) + "; use 1 or more neighbours");
  const int64_t V = word_embeddings.size(0);
  const int64_t named = std::min<int64_t>(V, static_cast<int64_t>(tok.vocab_size()));
  word_.assign(V, false), continuation_.assign(V, false), neighbours_.assign(V, {});
  const std::vector<int32_t> specials = {tok.cls_id(), tok.sep_id(), tok.pad_id(), tok.unk_id(), tok.mask_id()};
  std::vector<int64_t> candidates;  // every swappable id, ascending
  std::vector<int64_t> column(V, -1);  // id -> its position in candidates
  for (int64_t id = 0; id < named; ++id) {
    if (std::find(specials.begin(), specials.end(), id) != specials.end()) continue;
    const Piece p = piece_of(tok.kind(), tok.token(static_cast<int32_t>(id)));
    continuation_[id] = !p.starts;
    if (!p.starts || !letters(p.text)) continue;
    word_[id] = true;
    column[id] = static_cast<int64_t>(candidates.size());
    candidates.push_back(id);
  }
  std::vector<bool> seen(V, false);
  std::vector<int64_t> queries;  // the swappable words of the data
  for (const auto& row : data.ids)
    for (int32_t id : row)
      if (swappable(id) && !seen[id]) seen[id] = true, queries.push_back(id);
  std::sort(queries.begin(), queries.end());
  if (queries.empty() || candidates.size() < 2) return;
  torch::NoGradGuard no_grad;
  const torch::Tensor W = word_embeddings.detach().to(torch::kCPU, torch::kFloat);
  const torch::Tensor E = W / W.norm(2, 1, /*keepdim=*/true).clamp_min(1e-12);  // unit rows: products are cosines
  const torch::Tensor C = E.index_select(0, torch::tensor(candidates, torch::kLong));  // [Nc, D]
  const int64_t take = std::min<int64_t>(k, static_cast<int64_t>(candidates.size()) - 1);
  constexpr int64_t kChunk = 512;  // queries per product: [512, Nc] scores at a time
  for (size_t q0 = 0; q0 < queries.size(); q0 += kChunk) {
    const size_t q1 = std::min(queries.size(), q0 + kChunk);
    const std::vector<int64_t> ids(queries.begin() + static_cast<long>(q0), queries.begin() + static_cast<long>(q1));
    torch::Tensor S = E.index_select(0, torch::tensor(ids, torch::kLong)).matmul(C.t());  // [q, Nc] cosines
    for (size_t i = 0; i < ids.size(); ++i) S[static_cast<long>(i)][column[ids[i]]] = -2.0f;  // not itself
    const torch::Tensor top = std::get<1>(S.topk(take, 1)).contiguous();
    const auto t = top.accessor<int64_t, 2>();
    for (size_t i = 0; i < ids.size(); ++i) {
      auto& nb = neighbours_[ids[i]];
      for (int64_t j = 0; j < take; ++j) nb.push_back(static_cast<int32_t>(candidates[t[static_cast<long>(i)][j]]));
    }
  }
}

const std::vector<int32_t>& WordSwap::neighbours(int32_t id) const {
  static const std::vector<int32_t> none;
  return id >= 0 && id < static_cast<int32_t>(neighbours_.size()) ? neighbours_[id] : none;
}

core::Batch WordSwap::apply(const core::Batch& b, double p, uint64_t seed) const {
  core::Batch out = b;
  out.input_ids = b.input_ids.to(torch::kLong).clone().contiguous();
  out.labels = b.labels.to(torch::kFloat).clone().contiguous();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto ids = out.input_ids.accessor<int64_t, 2>();
  auto labels = out.labels.accessor<float, 1>();
  const int64_t B = out.input_ids.size(0), S = out.input_ids.size(1);
  for (int64_t r = 0; r < B; ++r) {
    if (u(rng) >= 0.5) continue;
    bool changed = false;
    for (int64_t s = 0; s < S; ++s) {
      const int64_t id = ids[r][s];
      if (id < 0 || id >= static_cast<int64_t>(neighbours_.size()) || neighbours_[id].empty()) continue;
      if (s + 1 < S && continues(ids[r][s + 1])) continue;  // a piece of a longer word
      if (u(rng) >= p) continue;
      const auto& nb = neighbours_[id];
      ids[r][s] = nb[std::uniform_int_distribution<size_t>(0, nb.size() - 1)(rng)];
      changed = true;
    }
    if (changed) labels[r] = std::numeric_limits<float>::quiet_NaN();
  }
  out.input_ids = out.input_ids.to(b.input_ids.scalar_type());
  return out;
}

core::Batch with_unlabelled_rows(const core::Batch& b, const core::EncodedDataset& pool, uint64_t seed, int pad_id) {
  const long B = b.input_ids.size(0), N = static_cast<long>(pool.size());
  const long n = std::min(B, N);
  if (n == 0) return b;
  std::vector<long> order(static_cast<size_t>(N));
  std::iota(order.begin(), order.end(), 0L);
  std::mt19937_64 rng(seed);
  for (long i = 0; i < n; ++i)  // the first n of a partial Fisher-Yates shuffle
    std::swap(order[i], order[std::uniform_int_distribution<long>(i, N - 1)(rng)]);
  order.resize(static_cast<size_t>(n));
  core::BatchOptions bo;
  bo.batch_size = static_cast<int>(n);
  bo.sort_by_length = false;
  bo.pad_to = static_cast<int>(b.input_ids.size(1));  // at least the labelled rows' length
  bo.pad_id = pad_id;
  core::Batch extra = core::make_batches(pool, bo, order).front();
  const long S = extra.input_ids.size(1), grow = S - b.input_ids.size(1);
  auto widen = [&](const torch::Tensor& t, int64_t fill) {  // int64, as make_batches writes both parts
    return grow == 0 ? t : torch::constant_pad_nd(t, {0, grow}, fill);
  };
  core::Batch out;
  out.input_ids = torch::cat({widen(b.input_ids, pad_id), extra.input_ids});
  out.token_type_ids = torch::cat({widen(b.token_type_ids, 0), extra.token_type_ids});
  out.attention_mask = torch::cat({widen(b.attention_mask, 0), extra.attention_mask});
  out.labels = torch::cat({b.labels, torch::full({n}, std::numeric_limits<float>::quiet_NaN())});
  out.index = b.index;
  out.index.resize(static_cast<size_t>(B + n), -1);
  return out;
}

}  // namespace hp::train
