// core::Progress with a fake clock: rate and ETA come from the units finished after the stage's first update,
// so resumed work, an earlier phase and the stage's own setup do not skew them (a gated run's second phase
// printed 10.5, 6.0, 3.9 steps/s while doing 1.7, then, with the earlier phase excluded, opened with
// "201/400 steps  0.2 steps/s  ETA 15m21s" for 0.6 steps/s: its setup sat in the first step), and a stage
// that has timed no unit yet says "?" rather than a guess.
#include <catch2/catch.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <sstream>

#include "core/base/log.h"
#include "skip.h"

TEST_CASE("progress: rate and ETA from the stage's first update, setup and earlier units excluded",
          "[core][progress]") {
  double now = 100.0;
  const auto clock = [&] { return now; };
  hp::core::Progress fresh("train", 1000, "steps", 0, clock);
  CHECK(fresh.status(0) == "[train] 0/1000 steps  ? steps/s  ETA ?");
  now += 30;  // setup and the first step
  fresh.update(1);
  CHECK(fresh.status(1) == "[train] 1/1000 steps  ? steps/s  ETA ?");
  now += 50;  // 100 steps in 50 s
  fresh.update(101);
  CHECK(fresh.status(101) == "[train] 101/1000 steps  2.0 steps/s  ETA 7m30s");

  // Phase two starts at step 600 of 1000 and spends 12 s on its setup and first step; then 40 steps in
  // 20 s are 2.0 steps/s, whatever phase one or the setup took.
  hp::core::Progress phase2("train", 1000, "steps", 600, clock);
  now += 12;
  phase2.update(601);
  CHECK(phase2.status(601) == "[train] 601/1000 steps  ? steps/s  ETA ?");
  now += 20;
  phase2.update(641);
  CHECK(phase2.status(641) == "[train] 641/1000 steps  2.0 steps/s  ETA 3m00s");
  CHECK(phase2.elapsed_s() == Approx(32.0));  // the stage's time, setup included (its "done" line)

  // Slow units: 2 points in 70 s print as seconds per point, not "0.0 points/s".
  hp::core::Progress slow("budget curves", 8, "points", 0, clock);
  slow.update(1);
  now += 70;
  CHECK(slow.status(3) == "[budget curves] 3/8 points  35 s per point  ETA 2m55s");
  hp::core::Progress batches("gradients", 10, "batches", 0, clock);
  batches.update(0);
  now += 40;
  CHECK(batches.status(2) == "[gradients] 2/10 batches  20 s per batch  ETA 2m40s");
}

TEST_CASE("progress: a log's first line of a stage already has a timed rate", "[core][progress]") {
  if (isatty(fileno(stderr))) return hp::test::skip("stderr is a terminal: progress rewrites a line there, no log");
  std::ostringstream out;
  const auto previous = spdlog::default_logger();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
  auto capture = std::make_shared<spdlog::logger>("progress_test", sink);
  capture->set_pattern("%v");
  spdlog::set_default_logger(capture);
  double now = 0.0;
  hp::core::Progress phase2("train", 400, "steps", 200, [&] { return now; });
  now += 3.0;  // setup and the first step
  phase2.update(201);
  now += 2.0;  // 1 step in 2 s (0.5 steps/s)
  phase2.update(202);
  spdlog::set_default_logger(previous);
  CHECK(out.str() == "[train] 202/400 steps  0.5 steps/s  ETA 6m36s\n");
}
