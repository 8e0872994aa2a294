// The run.h5 dataset names (eval/results_schema.h): every name a writer builds parses back to its parts,
// names of no kind are refused, and the table documents every kind.
#include <catch2/catch.hpp>

#include <set>

#include "eval/results_schema.h"

namespace r = hp::eval::results;

TEST_CASE("results schema: built names parse back to their parts", "[eval][schema]") {
  CHECK(r::importance_key("taylor") == "importance/taylor");
  CHECK(r::masks_key("lrp", 2) == "masks/lrp/seed2");
  CHECK(r::curve_series_key("loo", 10, "accuracy") == "curves/loo/seed10/accuracy");
  CHECK(r::curve_stat_key("attattr", "ci_lo") == "curves/attattr/ci_lo");

  auto k = r::parse_key(r::importance_key("taylor"));
  REQUIRE(k);
  CHECK((k->kind == r::Dataset::kImportance && k->criterion == "taylor" && k->seed == -1));
  k = r::parse_key(r::masks_key("lrp", 2));
  REQUIRE(k);
  CHECK((k->kind == r::Dataset::kMasks && k->criterion == "lrp" && k->seed == 2));
  k = r::parse_key(r::curve_series_key("loo", 10, r::kHeadsPruned));
  REQUIRE(k);
  CHECK((k->kind == r::Dataset::kCurveSeries && k->criterion == "loo" && k->seed == 10 && k->last == "heads_pruned"));
  for (const char* stat : r::kStats) {
    k = r::parse_key(r::curve_stat_key("attattr", stat));
    REQUIRE(k);
    CHECK((k->kind == r::Dataset::kCurveStat && k->criterion == "attattr" && k->last == stat));
  }
  k = r::parse_key("gates/p_open");
  REQUIRE(k);
  CHECK(k->kind == r::Dataset::kGatePOpen);
  CHECK(r::parse_key(r::prefix(r::Dataset::kGateLogAlpha))->kind == r::Dataset::kGateLogAlpha);
}

TEST_CASE("results schema: names of no kind are refused", "[eval][schema]") {
  for (const char* bad :
       {"importance/", "importance/a/b", "masks/lrp", "masks/lrp/seed", "masks/lrp/seedx", "masks/lrp/seed-1",
        "curves/loo/median", "curves/loo/seedA/accuracy", "gates/other", "history/x", ""})
    CHECK_FALSE(r::parse_key(bad));
}

TEST_CASE("results schema: the table documents every kind once, with a prefix its names start with", "[eval][schema]") {
  std::set<r::Dataset> kinds;
  for (const auto& d : r::run_h5_datasets()) {
    CHECK(kinds.insert(d.kind).second);
    CHECK(std::string(d.pattern).rfind(r::prefix(d.kind), 0) == 0);
  }
  CHECK(kinds.size() == 11);
  // Every gate trajectory is one whole key that parses back to its kind.
  for (auto d : r::kGateTrajectories) {
    CHECK(kinds.count(d));
    CHECK(r::parse_key(r::prefix(d))->kind == d);
  }
}
