// The selection slice (prune/data/selection.h, #58) on the real MRPC train split (3,668 rows): the last rows held out of
// training and ranking with the pairs that share a sentence with them and made the training runs' evaluation split, at most a tenth; a named split instead; the
// evaluation split, a negative count and a split too small refused naming the key.
#include <catch2/catch.hpp>

#include <set>

#include "core/base/errors.h"
#include "fixtures.h"
#include "prune/data/selection.h"

using Catch::Matchers::Contains;
using hp::prune::resolve_selection;

namespace {

hp::core::Config mrpc() {
  hp::core::Config c;
  c.data.task = "mrpc";
  c.train.train_split = "train", c.train.eval_split = "dev";
  c.prune.rank_split = "train", c.prune.eval_split = "dev";
  return c;
}

}  // namespace

TEST_CASE("the selection slice: the last select_examples rows of the training split, held out of training and "
          "ranking",
          "[prune][selection]") {
  const auto& task = hp::core::find_task("mrpc");
  const auto s = resolve_selection(mrpc(), task, hp::test::kSharedData);
  CHECK(s.split == "train[holdout:366]");  // a tenth of 3,668: 1,000 would leave too little to train on
  CHECK(s.cfg.train.eval_split == "train[holdout:366]");  // every training run's best checkpoint is chosen there
  CHECK(s.cfg.train.train_split == "train[rest:366]");
  CHECK(s.cfg.prune.rank_split == "train[rest:366]");  // ranked on what was trained on, never on the slice
  CHECK(s.cfg.prune.eval_split == "dev");           // the reported split is untouched
  CHECK_THAT(s.what, Contains("held out of training and ranking with the 38 rows that share their text") &&
                         Contains("over a tenth"));
  const auto held = hp::core::read_task(task, hp::test::kSharedData, s.split);
  const auto kept = hp::core::read_task(task, hp::test::kSharedData, s.cfg.train.train_split);
  CHECK(held.size() == 366);
  CHECK(kept.size() + held.size() + 38 == 3668);  // 38 pairs share a sentence with a held-out pair (Python counts 38)
  CHECK(kept.back().line < held.front().line);
  std::set<std::string> sentences;
  for (const auto& e : held) sentences.insert({e.text_a, e.text_b});
  for (const auto& e : kept) CHECK_FALSE((sentences.count(e.text_a) || sentences.count(e.text_b)));

  auto c = mrpc();
  c.prune.select_examples = 200;
  c.prune.rank_split = "dev";  // ranking elsewhere: left alone
  const auto small = resolve_selection(c, task, hp::test::kSharedData);
  CHECK(small.split == "train[holdout:200]");
  CHECK(small.cfg.train.train_split == "train[rest:200]");
  CHECK(small.cfg.prune.rank_split == "dev");

  c = mrpc();
  c.train.train_split = "train[:1000]";  // a slice already: the held-out rows are its last
  const auto sliced = resolve_selection(c, task, hp::test::kSharedData);
  CHECK(sliced.split == "train[:1000][holdout:100]");
  CHECK(sliced.cfg.train.train_split == "train[:1000][rest:100]");
}

TEST_CASE("the selection slice off, named, or refused", "[prune][selection]") {
  const auto& task = hp::core::find_task("mrpc");
  auto c = mrpc();
  c.prune.select_examples = 0;
  const auto off = resolve_selection(c, task, hp::test::kSharedData);
  CHECK(off.cfg.train.eval_split == "dev");
  CHECK(off.cfg.train.train_split == "train");
  CHECK_THAT(off.what, Contains("the split the run reports: its figures are optimistic"));

  c = mrpc();
  c.train.train_split = "train[:3000]";
  c.prune.select_split = "train[3000:]";
  const auto named = resolve_selection(c, task, hp::test::kSharedData);
  CHECK(named.cfg.train.eval_split == "train[3000:]");
  CHECK(named.cfg.train.train_split == "train[:3000]");

  c = mrpc();
  c.prune.select_split = "test";  // MRPC's test split has no labels: nothing to choose on
  CHECK_THROWS_WITH(resolve_selection(c, task, hp::test::kSharedData),
                    Contains("prune.select_split = test has no labels"));
  c.prune.select_split = "dev";
  CHECK_THROWS_WITH(resolve_selection(c, task, hp::test::kSharedData),
                    Contains("prune.select_split = dev is prune.eval_split = dev"));
  c.prune.select_split = "dev[:30]";  // a part of the reported split is no better
  CHECK_THROWS_WITH(resolve_selection(c, task, hp::test::kSharedData),
                    Contains("prune.select_split = dev[:30] is part of prune.eval_split = dev"));
  c.prune.select_split = "nosuch";
  CHECK_THROWS_WITH(resolve_selection(c, task, hp::test::kSharedData),
                    Contains("prune.select_split = 'nosuch' is not a split of mrpc; use one of train, dev, test"));
  c.prune.select_split = "";
  c.prune.select_examples = -1;
  CHECK_THROWS_AS(resolve_selection(c, task, hp::test::kSharedData), hp::ConfigError);
  c.prune.select_examples = 1000;
  c.train.train_split = "train[:9]";  // a tenth of 9 rows is none
  CHECK_THROWS_WITH(resolve_selection(c, task, hp::test::kSharedData),
                    Contains("train.train_split = train[:9] has 9 rows: too few"));
  c.train.train_split = "train[rest:100]";  // held out already: one hold-out per run
  CHECK_THROWS_WITH(resolve_selection(c, task, hp::test::kSharedData), Contains("holds rows out already"));
}
