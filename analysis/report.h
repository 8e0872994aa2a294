// `prune report RUN_DIR... --out report.html`: one self-contained offline HTML page (no network, no
// files beside it) with the static panels of analysis/report_panels.h and bertviz-style attention views,
// attribution trees and attention rollout of chosen examples (analysis/report_views.h), drawn by
// analysis/report/report.js. Page structure and data format: analysis/report/README.md.
// The same inputs give the same bytes.
#pragma once

#include <string>
#include <vector>

#include "analysis/report_panels.h"
#include "core/base/config.h"

namespace hp::analysis {

struct PageParts {
  std::string title;
  std::vector<Panel> panels;                         // static panels (summary … gates)
  std::string data_json;                             // the #hp-data object
  std::vector<std::pair<std::string, std::string>> trees;  // example name → attribution tree SVG ("" = none)
  std::string attention_note;                        // shown at the top of the attention panels
};

// The HTML page: the static panels, the attention panels report.js fills, the data and the inlined
// report.css / report.js.
std::string render_page(const PageParts& p);

int run_report(const core::Config& cfg);

}  // namespace hp::analysis
