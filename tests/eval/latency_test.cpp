// Side-by-side timing (eval/latency.h) with fake timers: the median of each model's rounds, and a speed-up above its
// FLOP bound measured again, then flagged, never reported as it is.
#include <catch2/catch.hpp>

#include <vector>

#include "eval/latency.h"

namespace {

// A timer that returns the next of `ms`, then the last one again.
struct Fake {
  std::vector<double> ms;
  size_t next = 0;
  int calls = 0;
  double operator()() {
    ++calls;
    return ms[std::min(next++, ms.size() - 1)];
  }
};

}  // namespace

TEST_CASE("time_side_by_side: the median of each model's rounds", "[eval][latency]") {
  Fake base{{10, 30, 20}}, small{{5, 4, 100}};  // medians 20 and 5: one slow round of either moves nothing
  const auto t = hp::eval::time_side_by_side(std::ref(base), std::ref(small), 8.0, true);
  CHECK(t.base_ms == 20);
  CHECK(t.small_ms == 5);
  CHECK(t.speedup == 4);
  CHECK(t.measured == 1);
  CHECK(t.suspect.empty());
  CHECK(base.calls == 3);
  CHECK(small.calls == 3);
}

TEST_CASE("time_side_by_side: a speed-up far above the FLOP bound is measured again, then flagged", "[eval][latency]") {
  using hp::eval::kBoundSlack;
  using hp::eval::kRetries;
  SECTION("a busy first measurement: the second one stands") {
    Fake base{{57, 57, 57, 4, 4, 4}}, small{{2, 2, 2}};  // x28.5, then x2.0 against a bound of x2.0
    const auto t = hp::eval::time_side_by_side(std::ref(base), std::ref(small), 2.0, true);
    CHECK(t.speedup == Approx(2.0));
    CHECK(t.measured == 2);
    CHECK(t.suspect.empty());
  }
  SECTION("above the bound every time: reported and flagged") {
    Fake base{{57}}, small{{2}};
    const auto t = hp::eval::time_side_by_side(std::ref(base), std::ref(small), 2.0, true);
    CHECK(t.speedup == Approx(28.5));
    CHECK(t.measured == 1 + kRetries);
    CHECK(base.calls == 3 * (1 + kRetries));
    CHECK_THAT(t.suspect, Catch::Contains("x28.5 is above 1.5 x its FLOP bound x2") &&
                              Catch::Contains("time it again with prune bench"));
  }
  SECTION("just within the slack: believed") {
    Fake base{{kBoundSlack * 2.0 * 1.0}}, small{{1.0}};
    const auto t = hp::eval::time_side_by_side(std::ref(base), std::ref(small), 2.0, true);
    CHECK(t.measured == 1);
    CHECK(t.suspect.empty());
  }
  SECTION("another precision (int8 against fp32): the FLOP bound does not hold, nothing is measured again") {
    Fake base{{57}}, small{{2}};
    const auto t = hp::eval::time_side_by_side(std::ref(base), std::ref(small), 2.0, false);
    CHECK(t.measured == 1);
    CHECK(t.suspect.empty());
  }
}
