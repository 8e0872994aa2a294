// The sentences the embedding run distils on (prune/embedding_data.h, #59): data.task's own, then prune.distill_tasks'
// training sentences, none of the held-out ones, each task at most as many as data.task's, the same for the same
// seed; the key's refusals.
#include <catch2/catch.hpp>

#include <set>

#include "core/base/errors.h"
#include "fixtures.h"
#include "prune/embedding_data.h"

using Catch::Matchers::Contains;
using hp::prune::distill_sentences;
using hp::prune::single_sentences;

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

TEST_CASE("prune.distill_tasks refusals name the key", "[prune][embed]") {
  using hp::prune::check_distill_tasks;
  CHECK_NOTHROW(check_distill_tasks({"sst2", "mrpc"}, "stsb"));
  CHECK_THROWS_WITH(check_distill_tasks({"sst3"}, "stsb"), Contains("prune.distill_tasks has 'sst3', no task"));
  CHECK_THROWS_WITH(check_distill_tasks({"stsb"}, "stsb"), Contains("data.task itself"));
  CHECK_THROWS_WITH(check_distill_tasks({"sst2", "sst2"}, "stsb"), Contains("names sst2 twice"));
  CHECK_THROWS_WITH(check_distill_tasks({"mnli_subset"}, "stsb"), Contains("has no train split"));
}
