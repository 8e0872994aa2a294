// core::Progress with a fake clock: rate and ETA come from the units finished since the stage began, so
// resumed work or an earlier phase does not inflate them (a gated run's second phase printed 10.5, 6.0,
// 3.9 steps/s while doing 1.7), and a stage that has finished nothing yet says ETA "?" rather than a guess.
#include <catch2/catch.hpp>

#include "core/base/log.h"

TEST_CASE("progress: rate and ETA from the stage's own start, earlier units excluded", "[core][progress]") {
  double now = 100.0;
  const auto clock = [&] { return now; };
  hp::core::Progress fresh("train", 1000, "steps", 0, clock);
  CHECK(fresh.status(0) == "[train] 0/1000 steps  0.0 steps/s  ETA ?");
  now += 50;  // 100 steps in 50 s
  CHECK(fresh.status(100) == "[train] 100/1000 steps  2.0 steps/s  ETA 7m30s");

  // Phase two starts at step 600 of 1000: 34 steps in 20 s is 1.7 steps/s, whatever phase one did.
  hp::core::Progress phase2("train", 1000, "steps", 600, clock);
  now += 20;
  CHECK(phase2.status(634) == "[train] 634/1000 steps  1.7 steps/s  ETA 3m35s");
  CHECK(phase2.elapsed_s() == Approx(20.0));
}
