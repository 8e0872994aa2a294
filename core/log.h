// Logging and progress: one stderr logger (spdlog) with module tags, "[eval] 512/872 …".
// Progress is a rewriting line on a terminal and plain log lines (every ~10%) otherwise.
// Results never go here: they go to files (see eval/ and prune/).
#pragma once

#include <chrono>
#include <string>

namespace hp::core {

// Configures the global logger once (pattern, stderr). Safe to call repeatedly.
void init_logging(bool verbose = false);

void log_info(const std::string& tag, const std::string& msg);
void log_warn(const std::string& tag, const std::string& msg);
// Logs `msg` at warning level only the first time `cause` is seen in this process.
void log_warn_once(const std::string& tag, const std::string& cause, const std::string& msg);

// Progress over `total` units of work, with rate and ETA.
class Progress {
 public:
  Progress(std::string tag, long total, std::string unit = "ex");
  // Marks `done` units finished (cumulative); `extra` is appended, e.g. "loss 0.41".
  void update(long done, const std::string& extra = "");
  // Ends the line and logs the total time and rate.
  void finish(const std::string& extra = "");
  double elapsed_s() const;

 private:
  std::string tag_, unit_;
  long total_;
  long done_ = 0;
  int last_decile_ = -1;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_print_;
};

// "3m10s", "42s", "1h02m".
std::string format_duration(double seconds);

}  // namespace hp::core
