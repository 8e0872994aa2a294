// Logging and progress: one stderr logger (spdlog) with module tags, "[eval] 512/872 …".
// Progress is a rewriting line on a terminal and plain log lines (every ~10%) otherwise.
// Results never go here: they go to files (see eval/ and prune/).
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace hp::core {

// Configures the global logger once (pattern, stderr). Safe to call repeatedly.
void init_logging(bool verbose = false);

// Quiet: no info, warnings or progress (the ranks > 0 of a data-parallel run; errors still reach main).
void set_log_quiet(bool quiet);
void log_info(const std::string& tag, const std::string& msg);
void log_warn(const std::string& tag, const std::string& msg);
// Logs `msg` at warning level only the first time `cause` is seen in this process.
void log_warn_once(const std::string& tag, const std::string& cause, const std::string& msg);

// Progress over `total` units of work. Rate and ETA count the units finished after this stage's first
// update, timed from it: the first unit carries the stage's setup (batching an epoch, first-call allocations
// and warm-up: a gated run's second phase opened at 0.2 steps/s for 0.6), and units finished before the
// stage (`already_done`: resumed work, an earlier phase) count towards done/total only. Until a unit is
// timed that way the line says "? unit/s  ETA ?", and a log (not a terminal) prints no line for the stage yet.
// `clock` (seconds) is for tests; the default is the steady clock.
class Progress {
 public:
  using Clock = std::function<double()>;
  Progress(std::string tag, long total, std::string unit = "ex", long already_done = 0, Clock clock = {});
  // Marks `done` units finished (cumulative, already_done included); `extra` is appended, e.g. "loss 0.41".
  // The first call starts the rate clock.
  void update(long done, const std::string& extra = "");
  // Ends the line and logs the time and rate of this stage, setup included.
  void finish(const std::string& extra = "");
  // Seconds since the stage began (its construction).
  double elapsed_s() const;
  // "[tag] done/total unit  R unit/s  ETA t" for `done` units now.
  std::string status(long done) const;

 private:
  std::string tag_, unit_;
  long total_;
  long first_ = 0, done_ = 0;
  long rate_first_ = -1;  // units done at the first update, where the rate clock starts; -1 before it
  int last_decile_ = -1;
  bool tty_;
  Clock clock_;
  double start_ = 0, rate_start_ = 0, last_print_ = -1;
};

// "3m10s", "42s", "1h02m".
std::string format_duration(double seconds);

}  // namespace hp::core
