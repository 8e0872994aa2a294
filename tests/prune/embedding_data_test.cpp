// The sentences the embedding run distils on (prune/data/distill_data.h, #59): data.task's own, then prune.distill_tasks'
// training sentences, none of the held-out ones, each task at most as many as data.task's, the same for the same
// seed; the key's refusals.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <set>

#include "core/base/errors.h"
#include "fixtures.h"
#include "prune/data/distill_data.h"

using Catch::Matchers::Contains;
using hp::prune::distill_sentences;
using hp::prune::single_sentences;

namespace {

// The test's own reading of "the same text", not the library's: ASCII letters and digits lower-cased.
std::string key(const std::string& s) {
  std::string k;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c)) || static_cast<unsigned char>(c) >= 0x80)
      k += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return k;
}

}  // namespace

TEST_CASE("distill sentences: STS-B's own, then as many SST-2 training sentences, never a held-out one",
          "[prune][embed]") {
  const auto& stsb = hp::core::find_task("stsb");
  const auto own = single_sentences(hp::core::read_task(stsb, hp::test::kSharedData, "train[:300]"));
  std::set<std::string> texts;
  for (const auto& e : own) texts.insert(e.text_a);
  CHECK(texts.size() == own.size());  // each sentence once
  CHECK(own.size() > 300);            // both sides of the pairs

  // Held out: two sentences the sample would otherwise take (as if they were evaluation sentences).
  const auto free = distill_sentences(own, {"sst2"}, hp::test::kSharedData, {}, 42, nullptr);
  const std::set<std::string> held = {free[own.size()].text_a, free.back().text_a};
  std::string what;
  const auto all = distill_sentences(own, {"sst2"}, hp::test::kSharedData, held, 42, &what);
  REQUIRE(all.size() == 2 * own.size());  // SST-2 has far more: capped at STS-B's count
  CHECK(std::equal(own.begin(), own.end(), all.begin(), [](auto& a, auto& b) { return a.text_a == b.text_a; }));
  std::set<std::string> seen;
  for (const auto& e : all) {
    CHECK_FALSE(held.count(e.text_a));
    CHECK(seen.insert(e.text_a).second);
  }
  CHECK(all[own.size()].line < all.back().line);  // SST-2's part in file order
  CHECK_THAT(what, Contains("sst2 +" + std::to_string(own.size()) + " of "));

  const auto again = distill_sentences(own, {"sst2"}, hp::test::kSharedData, held, 42, nullptr);
  const auto other = distill_sentences(own, {"sst2"}, hp::test::kSharedData, held, 7, nullptr);
  CHECK(again.back().text_a == all.back().text_a);  // the same seed, the same sample
  bool differs = false;
  for (size_t i = own.size(); i < all.size(); ++i) differs = differs || other[i].text_a != all[i].text_a;
  CHECK(differs);
  CHECK(distill_sentences(own, {}, hp::test::kSharedData, held, 42, nullptr).size() == own.size());
}

TEST_CASE("distill sentences: another task's copy of a held-out sentence, tokenised otherwise, is left out",
          "[prune][embed]") {
  // STS-B's embedding run with prune.distill_tasks: [mrpc], dev held out. 245 of MRPC's training sentences are STS-B
  // dev sentences PTB-tokenised ("Myanmar 's"); none of them byte for byte. Counted independently in Python over the
  // same files: 5,818 MRPC sentences are left once those, STS-B's own and repeats (so compared) are out.
  const auto& stsb = hp::core::find_task("stsb");
  const auto own = single_sentences(hp::core::read_task(stsb, hp::test::kSharedData, "train"));
  std::set<std::string> held;
  for (const auto& e : single_sentences(hp::core::read_task(stsb, hp::test::kSharedData, "dev"))) held.insert(e.text_a);
  std::string what;
  const auto all = distill_sentences(own, {"mrpc"}, hp::test::kSharedData, held, 42, &what);
  CHECK_THAT(what, Contains("mrpc +5818 of 5818"));
  std::set<std::string> held_keys;
  for (const auto& t : held) held_keys.insert(key(t));
  size_t leaked = 0;  // of MRPC's part (STS-B's own training sentences hold some of its dev's: the task's own data)
  for (size_t i = own.size(); i < all.size(); ++i) leaked += held_keys.count(key(all[i].text_a));
  CHECK(leaked == 0);
}

TEST_CASE("prune.distill_tasks refusals name the key", "[prune][embed]") {
  using hp::prune::check_distill_tasks;
  CHECK_NOTHROW(check_distill_tasks({"sst2", "mrpc"}, "stsb"));
  CHECK_THROWS_WITH(check_distill_tasks({"sst3"}, "stsb"), Contains("prune.distill_tasks has 'sst3', no task"));
  CHECK_THROWS_WITH(check_distill_tasks({"stsb"}, "stsb"), Contains("data.task itself"));
  CHECK_THROWS_WITH(check_distill_tasks({"sst2", "sst2"}, "stsb"), Contains("names sst2 twice"));
  CHECK_THROWS_WITH(check_distill_tasks({"mnli_subset"}, "stsb"), Contains("has no train split"));
}

TEST_CASE("distill rows for MRPC: STS-B's and RTE's training pairs, unlabelled, none sharing a text with MRPC",
          "[prune]") {
  using hp::prune::distill_rows;
  const auto& mrpc = hp::core::find_task("mrpc");
  std::string what;
  const auto rows = distill_rows(mrpc, {"stsb", "rte"}, hp::test::kSharedData, &what);
  // Counted independently in Python over the same files: 1,000 of STS-B's 5,749 training pairs share a sentence
  // with MRPC (train, dev or test; only 2 of them byte for byte), 45 more repeat a pair; RTE loses 3 repeats.
  CHECK(what == "stsb +4704 of 5749, rte +2487 of 2490");
  REQUIRE(rows.size() == 4704 + 2487);
  std::set<std::string> mrpc_texts;
  for (const char* split : {"train", "dev", "test"})
    for (const auto& e : hp::core::read_task(mrpc, hp::test::kSharedData, split))
      mrpc_texts.insert(key(e.text_a)), mrpc_texts.insert(key(e.text_b));
  for (const auto& r : rows) {
    CHECK_FALSE(r.has_label);
    CHECK_FALSE(r.text_b.empty());
    CHECK_FALSE(mrpc_texts.count(key(r.text_a)));
    CHECK_FALSE(mrpc_texts.count(key(r.text_b)));
  }
  // STS-B's line 2454 holds an MRPC dev sentence tokenised otherwise ("Myanmar's", MRPC "Myanmar 's"): left out.
  CHECK(std::none_of(rows.begin(), rows.begin() + 4704, [](const auto& r) { return r.line == 2454; }));
  // A one-text task's rows for a pair task: refused, naming the key; for a one-text task a pair task's sentences.
  CHECK_THROWS_WITH(distill_rows(mrpc, {"sst2"}, hp::test::kSharedData, nullptr),
                    Contains("prune.distill_tasks has sst2, whose rows are single texts"));
  const auto sentences = distill_rows(hp::core::find_task("sst2"), {"rte"}, hp::test::kSharedData, nullptr);
  CHECK(sentences.size() > 2487);
  CHECK(std::all_of(sentences.begin(), sentences.end(), [](const auto& r) { return r.text_b.empty(); }));
}
