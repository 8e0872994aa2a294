// prune/heads/schedule.h: schedule points to head counts, and rankings (global, per layer, minimum per layer).
#include <catch2/catch.hpp>

#include "core/base/errors.h"
#include "prune/heads/schedule.h"

using hp::core::HeadSet;
using hp::prune::Matrix;
using hp::prune::prune_to;
using hp::prune::RankOptions;
using hp::prune::schedule_counts;

namespace {

HeadSet all(int L, int H) { return HeadSet(L, std::vector<bool>(H, true)); }

int kept_in(const HeadSet& k, int l) {
  int n = 0;
  for (bool b : k[l]) n += b;
  return n;
}

}  // namespace

TEST_CASE("schedule: percentages round to the nearest head and bad schedules name prune.schedule",
          "[prune][schedule]") {
  CHECK(schedule_counts({0, 10, 50, 100}, "percent", 72) == std::vector<int>{0, 7, 36, 72});
  CHECK(schedule_counts({0, 3, 3, 9}, "count", 72) == std::vector<int>{0, 3, 3, 9});
  CHECK_THROWS_WITH(schedule_counts({0, 20, 10}, "percent", 72), Catch::Contains("not monotonic"));
  CHECK_THROWS_WITH(schedule_counts({0, 120}, "percent", 72), Catch::Contains("prune.schedule[1] = 120"));
  CHECK_THROWS_WITH(schedule_counts({0, 80}, "count", 72), Catch::Contains("0..72"));
  CHECK_THROWS_WITH(schedule_counts({0}, "heads", 72), Catch::Contains("prune.schedule_unit"));
  CHECK_THROWS_AS(schedule_counts({}, "percent", 72), hp::ConfigError);
}

TEST_CASE("ranking: global order prunes the least important heads first", "[prune][schedule]") {
  const Matrix imp = {{0.5, 0.1, 0.9}, {0.2, 0.8, 0.05}};
  auto k = prune_to(imp, all(2, 3), 3, {});
  // Lowest three: (1,2)=0.05, (0,1)=0.1, (1,0)=0.2.
  CHECK(k == HeadSet{{true, false, true}, {false, true, false}});
  // Continuing from there adds the next one only.
  auto k2 = prune_to(imp, k, 4, {});
  CHECK(k2 == HeadSet{{false, false, true}, {false, true, false}});
  CHECK_THROWS_AS(prune_to(imp, k2, 2, {}), hp::InternalError);  // cannot un-prune
}

TEST_CASE("ranking: per-layer spreads pruning evenly and min_heads_per_layer is respected", "[prune][schedule]") {
  const Matrix imp = {{0.01, 0.02, 0.03, 0.04}, {0.5, 0.6, 0.7, 0.8}};
  RankOptions per_layer;
  per_layer.per_layer = true;
  auto k = prune_to(imp, all(2, 4), 4, per_layer);
  CHECK(kept_in(k, 0) == 2);
  CHECK(kept_in(k, 1) == 2);
  CHECK(k[1] == std::vector<bool>{false, false, true, true});
  RankOptions floor;
  floor.min_heads_per_layer = 1;
  auto g = prune_to(imp, all(2, 4), 5, floor);  // layer 0 keeps its best head; layer 1 loses two
  CHECK(g[0] == std::vector<bool>{false, false, false, true});
  CHECK(kept_in(g, 1) == 2);
  CHECK_THROWS_WITH(prune_to(imp, all(2, 4), 7, floor), Catch::Contains("min_heads_per_layer"));
  CHECK(hp::prune::max_prunable(all(2, 4), 1) == 6);
}
