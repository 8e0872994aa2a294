// What the fuzz targets share: the input as a file (the parsers read paths), and the rule they enforce —
// headprune's own error types (one line, file and fix) are the only acceptable failure. Anything else
// (another exception, a crash, a leak, a sanitizer report, a timeout, a huge allocation) is a finding.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/base/errors.h"

namespace hp::fuzz {

// A per-process scratch folder in /dev/shm (RAM), created once.
inline const std::string& scratch() {
  static const std::string dir = [] {
    const std::string d = "/dev/shm/hp_fuzz_" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Writes the bytes to scratch()/relative and returns the path.
inline std::string as_file(const uint8_t* data, size_t size, const std::string& relative) {
  const std::string path = scratch() + "/" + relative;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
  return path;
}

// Runs f; headprune's errors are the expected outcome of bad input, everything else escapes to libFuzzer.
template <class F>
void expect_clean(F&& f) {
  try {
    f();
  } catch (const hp::Error&) {}
}

}  // namespace hp::fuzz
