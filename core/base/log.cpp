// Logging and progress output on stderr.
#include "core/base/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <set>

namespace hp::core {

void init_logging(bool verbose) {
  static std::once_flag once;
  std::call_once(once, [] {
    auto logger = spdlog::stderr_color_mt("headprune");
    logger->set_pattern("%H:%M:%S %^%l%$ %v");
    spdlog::set_default_logger(logger);
  });
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::info);
}

namespace {
bool g_quiet = false;
}

void set_log_quiet(bool quiet) {
  g_quiet = quiet;
  spdlog::set_level(quiet ? spdlog::level::off : spdlog::level::info);
}

void log_info(const std::string& tag, const std::string& msg) { spdlog::info("[{}] {}", tag, msg); }
void log_warn(const std::string& tag, const std::string& msg) { spdlog::warn("[{}] {}", tag, msg); }

void log_warn_once(const std::string& tag, const std::string& cause, const std::string& msg) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  if (seen.insert(tag + "/" + cause).second) log_warn(tag, msg);
}

std::string format_duration(double s) {
  char buf[32];
  long t = static_cast<long>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

Progress::Progress(std::string tag, long total, std::string unit, long already_done, Clock clock)
    : tag_(std::move(tag)),
      unit_(std::move(unit)),
      total_(total),
      first_(already_done),
      done_(already_done),
      tty_(isatty(fileno(stderr)) != 0),
      clock_(std::move(clock)) {
  if (!clock_) {
    const auto origin = std::chrono::steady_clock::now();
    clock_ = [origin] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count(); };
  }
  start_ = clock_();
}

double Progress::elapsed_s() const { return clock_() - start_; }

namespace {

// "points" → "point", "batches" → "batch", "ex" stays.
std::string singular(const std::string& unit) {
  if (unit.size() > 4 && unit.compare(unit.size() - 4, 4, "ches") == 0) return unit.substr(0, unit.size() - 2);
  if (unit.size() > 1 && unit.back() == 's') return unit.substr(0, unit.size() - 1);
  return unit;
}

}  // namespace

std::string Progress::status(long done) const {
  const double el = rate_first_ < 0 ? 0.0 : clock_() - rate_start_;
  const double rate = el > 0 ? static_cast<double>(done - rate_first_) / el : 0.0;
  // Under 0.1 a second the rate would print as 0.0: slow units say their seconds each instead.
  char rate_text[64];
  if (rate <= 0) std::snprintf(rate_text, sizeof rate_text, "? %s/s", unit_.c_str());
  else if (rate < 0.1) std::snprintf(rate_text, sizeof rate_text, "%.0f s per %s", 1 / rate, singular(unit_).c_str());
  else std::snprintf(rate_text, sizeof rate_text, "%.1f %s/s", rate, unit_.c_str());
  char line[256];
  std::snprintf(line, sizeof line, "[%s] %ld/%ld %s  %s  ETA %s", tag_.c_str(), done, total_, unit_.c_str(), rate_text,
                rate > 0 ? format_duration(static_cast<double>(total_ - done) / rate).c_str() : "?");
  return line;
}

void Progress::update(long done, const std::string& extra) {
  done_ = done;
  if (rate_first_ < 0) rate_first_ = done, rate_start_ = clock_();
  if (g_quiet) return;
  const std::string line = status(done) + (extra.empty() ? "" : "  " + extra);
  if (tty_) {
    const double now = clock_();
    if (done < total_ && last_print_ >= 0 && now - last_print_ < 0.2) return;
    last_print_ = now;
    std::fprintf(stderr, "\r%-100s", line.c_str());
    std::fflush(stderr);
    return;
  }
  int decile = total_ > 0 ? static_cast<int>(10 * done / total_) : 10;
  if (decile > last_decile_ && done > rate_first_) {  // a log line only with a timed rate
    last_decile_ = decile;
    spdlog::info("{}", line);
  }
}

void Progress::finish(const std::string& extra) {
  if (g_quiet) return;
  if (tty_) std::fprintf(stderr, "\r%-100s\r", "");
  const double el = elapsed_s();
  const long mine = done_ - first_;
  spdlog::info("[{}] done: {} {} in {} ({:.1f} {}/s){}{}", tag_, mine, unit_, format_duration(el),
               el > 0 ? static_cast<double>(mine) / el : 0.0, unit_, extra.empty() ? "" : "  ", extra);
}

}  // namespace hp::core
