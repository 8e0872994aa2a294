// String helpers the readers share. Torch-free and header-only (the torch-free analysis library uses it too).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace hp::core {

// One number through a printf format: format_number("%.2f", 0.5) → "0.50".
inline std::string format_number(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// The fields of `s` between occurrences of `sep`: "a\tb\t" → {"a", "b", ""}; "" → {""}.
inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at; (at = s.find(sep, start)) != std::string::npos; start = at + 1)
    parts.push_back(s.substr(start, at - start));
  parts.push_back(s.substr(start));
  return parts;
}

}  // namespace hp::core
