// The guide each command's --help ends with: one row per command ("" is the pruning run), the docs/ file
// to read and, after it, any further guides. tests/docs/docs_check.py checks every row's files exist.
#pragma once

#include <string>

namespace hp::cli {

struct Guide {
  const char* command;  // "" = the pruning run (no subcommand)
  const char* guide;    // docs/<workflow>.md, relative to the repository root
  const char* also;     // more guides, or ""
};

inline constexpr Guide kGuides[] = {
    {"", "docs/heads.md", "budgets: docs/budgets.md; --max-drop: docs/frontier.md; every guide: README.md"},
    {"train", "docs/heads.md", "--target-flops, --target-params: docs/budgets.md"},
    {"eval", "docs/models.md", "--precision: docs/precision.md"},
    {"infer", "docs/models.md", "--precision: docs/precision.md"},
    {"embed", "docs/models.md", "--precision: docs/precision.md"},
    {"export", "docs/models.md", "--int8: docs/precision.md"},
    {"bench", "docs/benchmarks.md", "--precision: docs/precision.md"},
    {"analyze", "docs/analysis.md", ""},
    {"explain", "docs/analysis.md", ""},
    {"triggers", "docs/analysis.md", ""},
    {"report", "docs/analysis.md", ""},
    {"config", "docs/configuration.md", ""},
};

// The last lines of `prune [command] --help`: "Guide: docs/x.md" (and "Also: ..."), or "" for no row.
inline std::string guide_footer(const std::string& command) {
  for (const auto& g : kGuides)
    if (command == g.command)
      return std::string("\nGuide: ") + g.guide + (*g.also ? std::string("\nAlso: ") + g.also : std::string());
  return "";
}

}  // namespace hp::cli
