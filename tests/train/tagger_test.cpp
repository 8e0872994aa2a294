// A tagger (token classification) through the pieces every stage reads: its files as a task (core/data/file_task),
// words encoded with the tag on each first sub-token and batched as [B, S] tags (core/data/batching), the loss
// (core/model/head_loss) against torch's cross-entropy with ignore_index, per-token distillation (train/distill),
// and its metrics and resamples (eval/metrics) against seqeval's scores (eval/seqeval) and by hand.
// tests/prune/tagger_reference.py checks the whole against transformers and the seqeval package.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/data/batching.h"
#include "core/data/file_task.h"
#include "core/model/head_loss.h"
#include "core/text/tokenizer.h"
#include "eval/evaluator.h"
#include "eval/metrics.h"
#include "eval/seqeval.h"
#include "fixtures.h"
#include "train/distill.h"

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

hp::core::DataConfig conll_files(const std::string& train, const std::string& dev) {
  hp::core::DataConfig d;
  d.train_file = hp::test::scratch_file("hp_tagger_test", "train.conll", train);
  d.validation_file = hp::test::scratch_file("hp_tagger_test", "dev.conll", dev);
  return d;
}

}  // namespace

TEST_CASE("a tagger's files: token head, tags sorted, token accuracy; BIO tags add seqeval's entity scores",
          "[train][tagger]") {
  const auto pos = hp::core::file_task(conll_files("the DET\nactor NOUN\n\nfilm NOUN\n", "the DET\n"), {});
  CHECK(pos.head == hp::core::Head::kToken);
  CHECK(pos.labels == std::vector<std::string>{"DET", "NOUN"});
  CHECK(pos.metrics == std::vector<std::string>{"accuracy"});
  const auto rows = hp::core::read_task(pos, "", "train");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].words == std::vector<std::string>{"the", "actor"});
  CHECK(rows[0].tags == std::vector<int>{0, 1});
  CHECK(rows[0].text_a == "the actor");
  CHECK(rows[1].line == 4);
  // The next files overwrite these (the same scratch names).
  const auto ner = hp::core::file_task(conll_files("the O\nactor B-PER\nplay I-PER\n", "the O\n"), {});
  CHECK(ner.labels == std::vector<std::string>{"B-PER", "I-PER", "O"});
  CHECK(ner.primary_metric == "entity_f1");
  // The model's id2label order wins when it names every tag.
  CHECK(hp::core::file_task(conll_files("the O\nactor B-PER\n", "the O\n"), {"O", "B-PER", "I-PER"}).labels ==
        std::vector<std::string>{"O", "B-PER", "I-PER"});
}

TEST_CASE("a word's tag on its first sub-token, none on the rest and the specials; truncation drops words",
          "[train][tagger]") {
  const auto tok = hp::core::Tokenizer::from_model_dir(hp::test::kTinyBert);
  hp::core::Example ex;
  ex.words = {"actor", "unbelievable", "films"};  // "actor"; "un ##believ ##able"? whatever the vocab gives
  ex.tags = {2, 0, 1};
  ex.has_label = true;
  const auto pieces = [&](const std::string& w) { return tok.tokenize_ids(w).size(); };
  const auto d = hp::core::encode_examples(tok, {ex}, 0);
  REQUIRE(d.tags.size() == 1);
  const auto& t = d.tags[0];
  REQUIRE(t.size() == 2 + pieces("actor") + pieces("unbelievable") + pieces("films"));
  std::vector<int32_t> want = {hp::core::kUnscored};
  for (size_t w = 0; w < ex.words.size(); ++w)
    for (size_t j = 0; j < pieces(ex.words[w]); ++j) want.push_back(j == 0 ? ex.tags[w] : hp::core::kUnscored);
  want.push_back(hp::core::kUnscored);
  CHECK(t == want);
  CHECK(d.ids[0].front() == tok.cls_id());
  CHECK(d.ids[0].back() == tok.sep_id());
  CHECK(hp::core::gold_labels(d) == std::vector<float>{2, 0, 1, hp::core::kSentenceEnd});
  // At 4 sub-tokens ([CLS] + 2 + [SEP]) only what fits of the words is kept and scored.
  const auto cut = hp::core::encode_examples(tok, {ex}, 4);
  CHECK(cut.ids[0].size() == 4);
  CHECK(hp::core::gold_labels(cut).front() == 2);
  // Batches: [B, S] tags, NaN where none is scored and at padding.
  hp::core::Example short_ex = ex;
  short_ex.words = {"film"}, short_ex.tags = {1};
  const auto two = hp::core::encode_examples(tok, {ex, short_ex}, 0);
  hp::core::BatchOptions bo;
  bo.sort_by_length = false;
  const auto b = hp::core::make_batches(two, bo).at(0);
  REQUIRE(b.labels.sizes() == b.input_ids.sizes());
  CHECK(b.labels[1][1].item<float>() == 1);
  CHECK(std::isnan(b.labels[1][0].item<float>()));
  CHECK(std::isnan(b.labels[1][3].item<float>()));  // padding
  CHECK(hp::core::labelled_count(b.labels).item<long>() == 4);
}

TEST_CASE("a token head's loss: torch's cross-entropy with ignore_index, per example its scored tokens' mean",
          "[train][tagger]") {
  torch::manual_seed(3);
  const auto logits = torch::randn({2, 4, 3}, torch::kFloat64);
  const auto tags = torch::tensor({{kNaN, 2.f, kNaN, 0.f}, {kNaN, 1.f, kNaN, kNaN}});
  const auto ignore = torch::where(tags.isnan(), torch::full_like(tags, -100), tags).to(torch::kLong);
  const double want =
      at::cross_entropy_loss(logits.flatten(0, 1), ignore.flatten(), {}, at::Reduction::Mean, -100).item<double>();
  CHECK(hp::core::labelled_loss(logits, tags, false).item<double>() == Approx(want).epsilon(1e-12));
  const auto each = hp::core::per_example_loss(logits, tags, false);
  const auto ce = [&](int b, int s, int c) { return -torch::log_softmax(logits[b][s], 0)[c].item<double>(); };
  CHECK(each[0].item<double>() == Approx((ce(0, 1, 2) + ce(0, 3, 0)) / 2).epsilon(1e-12));
  CHECK(each[1].item<double>() == Approx(ce(1, 1, 1)).epsilon(1e-12));
  // What LRP explains: the top logit at each scored token, summed.
  const auto top = hp::core::predicted_logit(logits, tags);
  CHECK(top[1].item<double>() == Approx(logits[1][1].max().item<double>()).epsilon(1e-12));
}

TEST_CASE("a token head's distillation: the KL at each real token, averaged over them", "[train][tagger]") {
  torch::manual_seed(4);
  const auto s = torch::randn({2, 3, 4}, torch::kFloat64), t = torch::randn({2, 3, 4}, torch::kFloat64);
  const auto mask = torch::tensor({{1, 1, 1}, {1, 0, 0}});
  const double T = 2;
  double sum = 0;
  for (auto [b, i] : {std::pair{0, 0}, {0, 1}, {0, 2}, {1, 0}})
    sum += hp::train::distill_kl(s[b][i].unsqueeze(0), t[b][i].unsqueeze(0), T).item<double>();
  CHECK(hp::train::distill_loss(s, t, T, false, mask).item<double>() == Approx(sum / 4).epsilon(1e-12));
}

TEST_CASE("a tagger's metrics: token accuracy and seqeval's entity scores; resamples keep sentences whole",
          "[train][tagger]") {
  hp::core::TaskSpec task;
  task.name = "tags";
  task.head = hp::core::Head::kToken;
  task.labels = {"B-PER", "I-PER", "O"};
  task.metrics = {"entity_f1", "accuracy", "entity_precision", "entity_recall"};
  const float E = hp::core::kSentenceEnd;
  // Sentence 1: gold B I, predicted B I; sentence 2: gold I O (an entity of its own), predicted O O. Read as one
  // sequence, sentence 2's I-PER would extend sentence 1's entity and no predicted entity would match.
  const std::vector<float> gold = {0, 1, E, 1, 2, E}, pred = {0, 1, E, 2, 2, E};
  const auto m = hp::eval::compute_metrics(task, pred, gold);
  const auto e = hp::eval::entity_scores({{"B-PER", "I-PER"}, {"I-PER", "O"}}, {{"B-PER", "I-PER"}, {"O", "O"}});
  CHECK(m.at("accuracy") == Approx(3.0 / 4));
  CHECK(m.at("entity_f1") == Approx(e.f1));
  CHECK(m.at("entity_precision") == Approx(1.0));
  CHECK(m.at("entity_recall") == Approx(0.5));
  std::mt19937_64 gen(1);
  for (int r = 0; r < 20; ++r) {
    const auto idx = hp::eval::resample_rows(gold, gen);
    CHECK(idx.size() == 6);  // two sentences of three entries, markers included
    for (size_t k = 0; k < idx.size(); k += 3) {  // each drawn run is a whole sentence, its marker last
      CHECK((idx[k] == 0 || idx[k] == 3));
      CHECK(idx[k + 1] == idx[k] + 1);
      CHECK(idx[k + 2] == idx[k] + 2);
    }
  }
  // Without markers: as many uniform draws as rows.
  CHECK(hp::eval::resample_rows({1, 0, 1}, gen).size() == 3);
  // Predictions from [N, S, C] logits read only the scored tokens, sentence by sentence.
  hp::core::EncodedDataset d;
  d.tags = {{hp::core::kUnscored, 1, hp::core::kUnscored}, {hp::core::kUnscored, 0}};
  auto logits = torch::zeros({2, 3, 2});
  logits[0][1][0] = 5, logits[1][1][1] = 5, logits[1][0][1] = 5;
  CHECK(hp::eval::predictions_of(logits, d, false) == std::vector<float>{0, E, 1, E});
}
