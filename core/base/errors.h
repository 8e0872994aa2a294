// Errors: one exception hierarchy, thrown by library code and caught once in cli/main.cpp.
// Message form (one line): "<where>: <what was found>; <fix>".
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace hp {

// The exit code of a run stopped by Ctrl-C or SIGTERM with its finished work saved (128 + SIGINT): the same command
// resumes.
inline constexpr int kInterruptedExit = 130;

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Bad configuration or command-line usage (exit code 2).
struct ConfigError : Error {
  using Error::Error;
};
// Bad or missing input files and data rows.
struct InputError : Error {
  using Error::Error;
};
// Checkpoint folders, tensor files, key tables.
struct CheckpointError : Error {
  using Error::Error;
};
// A data-parallel run cannot go on: a rank failed, died or hangs, or the rendezvous failed.
struct DistributedError : Error {
  using Error::Error;
};
// A broken invariant inside headprune: a bug, not a user mistake.
struct InternalError : Error {
  using Error::Error;
};

// Throws ConfigError(msg) unless `ok`: the validators' one-line checks.
inline void need(bool ok, const std::string& msg) {
  if (!ok) throw ConfigError(msg);
}

// Throws ConfigError "<key> = <value>, <what>; <fix>", e.g. "gates.beta = 2, must be in (0, 1]; …".
template <class T>
[[noreturn]] void throw_bad_value(const std::string& key, const T& value, const std::string& what,
                                  const std::string& fix) {
  std::ostringstream os;
  os << key << " = " << value << ", " << what << "; " << fix;
  throw ConfigError(os.str());
}

}  // namespace hp

#define HP_CHECK(cond, msg)                                                                             \
  do {                                                                                                  \
    if (!(cond)) {                                                                                      \
      std::ostringstream hp_check_os_;                                                                  \
      hp_check_os_ << __FILE__ << ":" << __LINE__ << ": internal check failed (" #cond << "): " << msg; \
      throw ::hp::InternalError(hp_check_os_.str());                                                    \
    }                                                                                                   \
  } while (0)
