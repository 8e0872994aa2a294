// train/augment (TinyBERT's word swaps for distillation) on the tiny WordPiece vocabulary, whose entries hold whole
// words, "##" continuations, punctuation and specials: the neighbours against a brute-force ranking, and a batch's
// rewrite (only whole words of letters, the row's label NaN only where a word changed, deterministic in the seed).
#include "train/augment.h"
#include "core/model/head_loss.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>

#include "core/base/errors.h"  // ConfigError
#include "fixtures.h"

namespace {

// Vocabulary id i sits at the angle 0.0003 i² on the unit circle (at most 2.8 rad: cosine falls with the angle
// between two ids), scaled by 1 + i % 3 (a norm the cosine must ignore): the nearer id in angle is the nearer one,
// unequal gaps leave no ties.
torch::Tensor circle(int64_t V) {
  torch::Tensor e = torch::zeros({V, 2});
  for (int64_t i = 0; i < V; ++i) {
    const double a = 0.0003 * static_cast<double>(i * i), r = 1.0 + static_cast<double>(i % 3);
    e[i][0] = r * std::cos(a), e[i][1] = r * std::sin(a);
  }
  return e;
}

// The test's own reading of a WordPiece vocabulary: a swappable word is 2 or more letters, no "##", not a special.
bool is_word(const std::string& t) { return std::regex_match(t, std::regex("[A-Za-z]{2,}")); }

hp::core::EncodedDataset one_row(std::vector<int32_t> ids) {
  hp::core::EncodedDataset d;
  d.type_ids.emplace_back(ids.size(), 0);
  d.ids.push_back(std::move(ids));
  d.labels.push_back(1);
  d.has_labels = true;
  return d;
}

}  // namespace

TEST_CASE("word swaps: the nearest whole words by cosine in the embeddings, never the word itself", "[train]") {
  const auto tok = hp::core::Tokenizer::from_model_dir(hp::test::kTinyBert);
  const int64_t V = static_cast<int64_t>(tok.vocab_size());
  const int32_t good = *tok.find("good"), movie = *tok.find("movie"), ing = *tok.find("##ing"), comma = *tok.find(","),
                cls = tok.cls_id();
  const auto data = one_row({cls, good, movie, ing, comma, tok.sep_id()});
  const hp::train::WordSwap swap(tok, circle(V), data, 4);
  for (int32_t id : {good, movie}) {
    INFO(tok.token(id));
    std::vector<std::pair<double, int32_t>> ranked;  // by the angle's gap, over the test's own word set
    for (int32_t j = 0; j < V; ++j)
      if (j != id && is_word(tok.token(j))) ranked.push_back({std::abs(0.0003 * (double(j) * j - double(id) * id)), j});
    std::sort(ranked.begin(), ranked.end());
    std::vector<int32_t> expected;
    for (int k = 0; k < 4; ++k) expected.push_back(ranked[k].second);
    CHECK(swap.neighbours(id) == expected);
    CHECK(swap.swappable(id));
  }
  // Only the data's words get neighbours; a continuation, punctuation and the specials are never words.
  CHECK(swap.neighbours(*tok.find("bad")).empty());
  for (int32_t id : {ing, comma, cls, tok.sep_id(), tok.pad_id(), tok.mask_id()}) {
    INFO(tok.token(id));
    CHECK_FALSE(swap.swappable(id));
    CHECK(swap.neighbours(id).empty());
  }
  CHECK_THROWS_AS(hp::train::WordSwap(tok, circle(V), data, 0), hp::ConfigError);
}

TEST_CASE("word swaps rewrite half the rows, whole words only, and the teacher labels a changed row", "[train]") {
  const auto tok = hp::core::Tokenizer::from_model_dir(hp::test::kTinyBert);
  const int64_t V = static_cast<int64_t>(tok.vocab_size());
  const int32_t good = *tok.find("good"), movie = *tok.find("movie"), act = *tok.find("act"), ing = *tok.find("##ing"),
                the = *tok.find("the"), comma = *tok.find(",");
  // [CLS] good movie act ##ing , the [SEP] [PAD]: "act" is the first piece of "acting" and must stay.
  const std::vector<int32_t> row = {tok.cls_id(), good, movie, act, ing, comma, the, tok.sep_id(), tok.pad_id()};
  const auto data = one_row(row);
  const hp::train::WordSwap swap(tok, circle(V), data, 3);
  constexpr int64_t B = 400;
  hp::core::Batch b;
  b.input_ids = torch::tensor(std::vector<int64_t>(row.begin(), row.end())).repeat({B, 1});
  b.token_type_ids = torch::zeros_like(b.input_ids);
  b.attention_mask = torch::ones_like(b.input_ids);
  b.attention_mask.select(1, 8).fill_(0);
  b.labels = torch::arange(B).to(torch::kFloat);
  const torch::Tensor before = b.input_ids.clone();
  const hp::core::Batch a = swap.apply(b, /*p=*/1.0, /*seed=*/11);
  CHECK(torch::equal(b.input_ids, before));  // the input is not touched
  CHECK(a.input_ids.sizes() == b.input_ids.sizes());
  CHECK(torch::equal(a.attention_mask, b.attention_mask));
  const std::set<int32_t> words = {good, movie, the};
  int64_t rewritten = 0;
  for (int64_t r = 0; r < B; ++r) {
    bool changed = false;
    for (int64_t s = 0; s < 9; ++s) {
      const int32_t was = row[s], now = static_cast<int32_t>(a.input_ids[r][s].item<int64_t>());
      if (now == was) continue;
      changed = true;
      INFO("row " << r << ", position " << s);
      REQUIRE(words.count(was));  // never "act" before "##ing", punctuation or a special
      const auto& nb = swap.neighbours(was);
      CHECK(std::find(nb.begin(), nb.end(), now) != nb.end());
    }
    // p = 1: a rewritten row swaps every whole word; its label is NaN (the teacher's), the others keep theirs.
    const float label = a.labels[r].item<float>();
    if (changed) {
      ++rewritten;
      CHECK(std::isnan(label));
      for (int64_t s : {1, 2, 6}) CHECK(a.input_ids[r][s].item<int64_t>() != row[s]);
    } else {
      CHECK(label == static_cast<float>(r));
    }
  }
  CHECK(rewritten > B * 2 / 5);  // each row with probability 1/2
  CHECK(rewritten < B * 3 / 5);
  // Deterministic in the seed, and the seed matters; p = 0 changes nothing.
  CHECK(torch::equal(swap.apply(b, 1.0, 11).input_ids, a.input_ids));
  CHECK_FALSE(torch::equal(swap.apply(b, 1.0, 12).input_ids, a.input_ids));
  CHECK(torch::equal(swap.apply(b, 0.0, 11).input_ids, b.input_ids));
}

TEST_CASE("the task loss of a batch with rows the teacher labels is the mean over the labelled rows", "[train]") {
  const torch::Tensor logits = torch::tensor({{1.0f, 2.0f, 0.0f}, {0.3f, -1.0f, 0.5f}, {2.0f, 0.0f, 0.0f}});
  const float nan = std::nanf("");
  // Hand cross-entropy of rows 0 and 2 (labels 1 and 0); row 1 has none.
  const double ce0 = -std::log(std::exp(2.0) / (std::exp(1.0) + std::exp(2.0) + 1.0));
  const double ce2 = -std::log(std::exp(2.0) / (std::exp(2.0) + 2.0));
  CHECK(hp::core::labelled_loss(logits, torch::tensor({1.0f, nan, 0.0f}), false).item<double>() ==
        Approx((ce0 + ce2) / 2).epsilon(1e-6));
  // Regression: the squared error of the labelled rows' first output.
  CHECK(hp::core::labelled_loss(logits.narrow(1, 0, 1), torch::tensor({nan, 1.3f, 1.0f}), true).item<double>() ==
        Approx((1.0 + 1.0) / 2).epsilon(1e-6));
  // No labelled row: no task loss (not NaN); every row labelled: torch's own mean.
  CHECK(hp::core::labelled_loss(logits, torch::tensor({nan, nan, nan}), false).item<double>() == 0.0);
  const torch::Tensor y = torch::tensor({1.0f, 2.0f, 0.0f});
  CHECK(hp::core::labelled_loss(logits, y, false).item<double>() ==
        Approx(torch::cross_entropy_loss(logits, y.to(torch::kLong)).item<double>()).epsilon(1e-6));
}

TEST_CASE("unlabelled rows join a batch: as many as it has, distinct, padded, labelled NaN, drawn from the seed",
          "[train]") {
  // A pool of 9 rows, row i of length 3 + i holding the id 100 + i; a batch of 4 labelled rows of length 6.
  hp::core::EncodedDataset pool;
  for (int i = 0; i < 9; ++i) {
    pool.ids.emplace_back(3 + i, 100 + i);
    pool.type_ids.emplace_back(3 + i, 1);
    pool.labels.push_back(std::nanf(""));
  }
  hp::core::Batch b;
  b.input_ids = torch::full({4, 6}, 7, torch::kLong);
  b.input_ids.narrow(1, 4, 2).fill_(0);  // two pads at the end
  b.token_type_ids = torch::zeros({4, 6}, torch::kLong);
  b.attention_mask = (b.input_ids != 0).to(torch::kLong);
  b.labels = torch::tensor({0.0f, 1.0f, 2.0f, 1.0f});
  b.index = {5, 6, 7, 8};
  const hp::core::Batch out = hp::train::with_unlabelled_rows(b, pool, 3, /*pad_id=*/0);
  REQUIRE(out.input_ids.size(0) == 8);
  const long S = out.input_ids.size(1);
  std::set<int64_t> drawn;
  long longest = 6;
  for (long r = 4; r < 8; ++r) {
    const int64_t id = out.input_ids[r][0].item<int64_t>();
    const long len = id - 100 + 3;  // row id - 100 has 3 + that many tokens
    REQUIRE((id >= 100 && id < 109));
    drawn.insert(id);
    longest = std::max(longest, len);
    CHECK(out.attention_mask[r].sum().item<long>() == len);
    CHECK(out.input_ids[r].narrow(0, 0, len).eq(id).all().item<bool>());
    CHECK(out.token_type_ids[r].narrow(0, 0, len).eq(1).all().item<bool>());
    CHECK(std::isnan(out.labels[r].item<float>()));
    CHECK(out.index[r] == -1);
  }
  CHECK(drawn.size() == 4);  // no row twice
  CHECK(S == longest);       // the longer part's length, here the pool's
  // The labelled rows as they were, padded further with the pad id and no attention.
  CHECK(torch::equal(out.input_ids.narrow(0, 0, 4).narrow(1, 0, 6), b.input_ids));
  CHECK(out.input_ids.narrow(0, 0, 4).narrow(1, 6, S - 6).eq(0).all().item<bool>());
  CHECK(torch::equal(out.attention_mask.narrow(0, 0, 4).sum(1), b.attention_mask.sum(1)));
  CHECK(torch::equal(out.labels.narrow(0, 0, 4), b.labels));
  CHECK(std::vector<long>(out.index.begin(), out.index.begin() + 4) == b.index);
  // Deterministic in the seed; other seeds draw other rows; a smaller pool gives what it has.
  CHECK(torch::equal(hp::train::with_unlabelled_rows(b, pool, 3, 0).input_ids, out.input_ids));
  bool differs = false;
  for (uint64_t seed = 4; seed < 8; ++seed)
    differs = differs || !torch::equal(hp::train::with_unlabelled_rows(b, pool, seed, 0).input_ids, out.input_ids);
  CHECK(differs);
  hp::core::EncodedDataset two = pool;
  two.ids.resize(2), two.type_ids.resize(2), two.labels.resize(2);
  CHECK(hp::train::with_unlabelled_rows(b, two, 3, 0).input_ids.size(0) == 6);
  CHECK(hp::train::with_unlabelled_rows(b, hp::core::EncodedDataset{}, 3, 0).input_ids.size(0) == 4);
}
