// Timing helpers the C++ benches share: one call's seconds, and the median of a sample.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace hp::bench {

inline double seconds_of(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The upper median of `v` (non-empty).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace hp::bench
