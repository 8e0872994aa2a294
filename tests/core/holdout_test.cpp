// Held-out rows (core/data/holdout.h): whole rows from the end, and the rest without any row that shares their text.
// Hand counts on made-up rows; on SST-2's real train split the counts a Python script of the same rule gives
// (word spans, no length cap) and a direct substring check that no row left to train on sits inside a held row.
#include <catch2/catch.hpp>

#include <numeric>

#include "core/base/errors.h"
#include "core/data/holdout.h"
#include "fixtures.h"

using Catch::Matchers::Contains;
using hp::core::Example;
using hp::core::hold_out;
using Rows = std::vector<std::size_t>;

namespace {

std::vector<Example> texts(const std::vector<std::string>& t) {
  std::vector<Example> out;
  for (const auto& s : t) out.push_back(Example{s, "", 0, true, 0});
  return out;
}

}  // namespace

TEST_CASE("hold_out: the last whole rows, and the rest without their parts and copies", "[glue][holdout]") {
  // Whole: 0, 3, 5, 6, 7, 8. "m n" is inside 5, "x y" inside 3, "d e" inside 6 (spaces do not count).
  const auto rows = texts({"a b c d", "m n", "x y", "x y z", "d e", "the m n here", "c  d e ", "q r", "q r"});
  const auto h = hold_out(rows, 4);
  CHECK(h.held == Rows{5, 6, 7, 8});
  CHECK(h.rest == Rows{0, 2, 3});  // 1 is part of 5, 4 part of 6
  CHECK(h.dropped == 2);
  CHECK(h.held.size() + h.rest.size() + h.dropped == rows.size());

  const auto all = hold_out(rows, 100);  // fewer whole rows than asked: all of them
  CHECK(all.held == Rows{0, 3, 5, 6, 7, 8});
  CHECK(all.rest.empty());
  CHECK(all.dropped == 3);

  const auto copies = hold_out(texts({"q r", "z", "q  r"}), 1);  // a copy is not trained on either
  CHECK(copies.held == Rows{2});
  CHECK(copies.rest == Rows{1});

  // "c d" is part of "a b c d", but a held row's words elsewhere do not make a row share its text.
  const auto words = hold_out(texts({"a b c d", "b c", "c d x"}), 1);
  CHECK(words.held == Rows{2});
  CHECK(words.rest == Rows{0, 1});
}

TEST_CASE("hold_out on pairs: a row that shares either sentence with a held row is not trained on", "[glue][holdout]") {
  std::vector<Example> rows;
  for (auto [a, b] :
       std::vector<std::pair<std::string, std::string>>{{"s1", "s2"}, {"s3", "s4"}, {"s2 ", "s5"}, {"s6", "s7"}})
    rows.push_back(Example{a, b, 0, true, 0});
  CHECK(hold_out(rows, 1).held == Rows{3});
  CHECK(hold_out(rows, 1).rest == Rows{0, 1, 2});
  const auto two = hold_out(rows, 2);
  CHECK(two.held == Rows{2, 3});
  CHECK(two.rest == Rows{1});  // row 0 shares "s2" with row 2
  CHECK(two.dropped == 1);
}

TEST_CASE("split specs [holdout:N] and [rest:N] on SST-2: 1,000 whole sentences, none of them trained on",
          "[glue][holdout]") {
  using hp::core::parse_split_spec;
  const auto& sst2 = hp::core::find_task("sst2");
  const auto train = hp::core::read_task(sst2, hp::test::kSharedData, "train");
  const auto held = hp::core::read_task(sst2, hp::test::kSharedData, "train[holdout:1000]");
  const auto rest = hp::core::read_task(sst2, hp::test::kSharedData, "train[rest:1000]");
  REQUIRE(train.size() == 67349);
  REQUIRE(held.size() == 1000);
  // A Python script of the same rule counts 6,885 whole rows and 10,293 rows sharing text with the last 1,000.
  CHECK(rest.size() == 67349 - 1000 - 10293);
  CHECK(held.front().line > rest.back().line - 10000);  // from the end of the file, in file order
  std::size_t words = 0;
  for (const auto& e : held) words += std::count(e.text_a.begin(), e.text_a.end(), ' ') + 1;
  CHECK(words / 1000.0 > 18.0);  // whole sentences, like dev's 19.5 words (the last 1,000 rows: 9.4)
  std::string joined = "|";
  for (const auto& e : held) joined += " " + e.text_a + " |";
  std::size_t inside = 0;
  for (const auto& e : rest)
    if (std::count(e.text_a.begin(), e.text_a.end(), ' ') >= 2 &&
        joined.find(" " + e.text_a + " ") != std::string::npos)
      ++inside;
  CHECK(inside == 0);  // of the last 1,000 rows by number, 892 sit inside training rows

  const auto s = parse_split_spec("train[:5000][holdout:100]");
  CHECK((s.name == "train" && s.end == 5000 && s.holdout == 100 && s.held));
  CHECK(hp::core::format_split_spec(s) == "train[:5000][holdout:100]");
  CHECK(hp::core::format_split_spec(parse_split_spec("train[rest:7]")) == "train[rest:7]");
  const auto head = hp::core::read_task(sst2, hp::test::kSharedData, "train[:5000][holdout:100]");
  CHECK(head.size() == 100);
  CHECK(head.back().line <= 5001);
  for (const std::string bad :
       {"train[holdout:0]", "train[holdout:x]", "[holdout:5]", "train[rest:-3]", "train[holdout:5"})
    CHECK_THROWS_WITH(parse_split_spec(bad, "prune.select_split"), Contains("prune.select_split = '" + bad + "'"));
}
