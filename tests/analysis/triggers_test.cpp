// Hao et al.'s adversarial triggers (analysis/triggers.h): the insertion and the pattern ranking by hand.
#include <catch2/catch.hpp>

#include <algorithm>

#include "analysis/triggers.h"

using hp::analysis::insert_at;
using hp::analysis::insert_tokens;
using hp::analysis::Pattern;
using hp::analysis::top_patterns;

TEST_CASE("triggers: tokens go into the first segment, the rest keeps its order", "[triggers]") {
  // [CLS]=2 a b [SEP]=3 c [SEP]=3
  const std::vector<int32_t> ids = {2, 10, 11, 3, 12, 3};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<int> pos;
    const auto out = insert_tokens(ids, 3, {90, 91, 92, 93}, rng, &pos);
    REQUIRE(out.size() == ids.size() + 4);
    CHECK(out.front() == 2);
    const auto sep = std::find(out.begin(), out.end(), 3) - out.begin();
    CHECK(sep == 7);  // the first segment grew by the four tokens
    CHECK(std::vector<int32_t>(out.begin() + sep, out.end()) == std::vector<int32_t>{3, 12, 3});
    std::vector<int32_t> rest;
    for (auto t : std::vector<int32_t>(out.begin() + 1, out.begin() + sep))
      if (t < 90) rest.push_back(t);
    CHECK(rest == std::vector<int32_t>{10, 11});  // the original words keep their order
    CHECK(insert_at(ids, {90, 91, 92, 93}, pos) == out);  // the baseline replays the same positions
  }
  // Every position of the first segment is drawn.
  std::vector<int> seen(4, 0);
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<int> pos;
    insert_tokens(ids, 3, {90}, rng, &pos);
    ++seen.at(pos[0]);
  }
  CHECK(seen[0] == 0);
  CHECK((seen[1] > 0 && seen[2] > 0 && seen[3] > 0));
}

TEST_CASE("triggers: the k most frequent patterns, ties by ids", "[triggers]") {
  const auto top = top_patterns({{5, 6, 2}, {1, 2, 7}, {3, 4, 2}, {9, 9, 1}}, 3);
  REQUIRE(top.size() == 3);
  CHECK((top[0].from == 1 && top[0].count == 7));
  CHECK((top[1].from == 3 && top[2].from == 5));
  CHECK(top_patterns({{1, 1, 1}}, 3).size() == 1);
}
