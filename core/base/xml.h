// Text safe inside XML/HTML elements and double-quoted attributes, for every SVG and HTML writer
// (prune/plot, analysis/attr_tree, the report). Header-only and torch-free, so the torch-free
// libraries use it too.
#pragma once

#include <string>

namespace hp::core {

inline std::string xml_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

}  // namespace hp::core
