// `prune report RUN_DIR... --out report.html`: one self-contained offline HTML page (no network, no
// files beside it) with the static panels of analysis/report/report_panels.h and bertviz-style attention views,
// attribution trees and attention rollout of chosen examples (analysis/report/report_views.h), drawn by
// analysis/report/report.js. Page structure and data format: analysis/report/README.md.
// The same inputs give the same bytes.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/report/report_panels.h"
#include "analysis/report/report_views.h"
#include "core/base/config.h"
#include "core/data/glue.h"
#include "core/io/checkpoint.h"
#include "core/model/bert.h"
#include "core/text/tokenizer.h"

namespace hp::analysis {

struct PageParts {
  std::string title;
  std::vector<Panel> panels;  // static panels (summary … gates)
  std::string data_json;  // the #hp-data object
  std::vector<std::pair<std::string, std::string>> trees;  // example name → attribution tree SVG ("" = none)
  std::string attention_note;  // shown at the top of the attention panels
};

// The HTML page: the static panels, the attention panels report.js fills, the data and the inlined
// report.css / report.js.
std::string render_page(const PageParts& p);

// An example of the attention views and the name the page gives it ("dev #12", "text", "FILE:LINE").
struct NamedExample {
  std::string name;
  core::Example ex;
};

// What the stages of `prune report` share; cli/report_cmd.cpp runs them in order.
struct ReportContext {
  const core::Config* cfg = nullptr;
  ReportFolders folders;  // the folders named, sorted by what they hold
  const core::TaskSpec* task = nullptr;
  std::string model_dir;  // the model of the attention views
  std::string slim_dir;  // its slimmed export beside it ("" = none)
  std::string out;  // report.out resolved
  std::vector<NamedExample> examples;  // report.examples (or the first report.count rows), text, texts
  std::optional<core::Bert> model, slim;
  core::LoadReport loaded;  // model_dir's: a fresh classifier draws no trees
  std::optional<core::Tokenizer> tok;
  ViewSettings views;
};

// Stage 1. Sorts the folders named (at least one, or report.model), then settles the task (the folders'
// own unless data.task says otherwise), the models and the output file.
void resolve_report(ReportContext& ctx, const core::Config& cfg);

// Stage 2. The page's title and static panels.
PageParts static_page(const ReportContext& ctx);

// Stage 3. The chosen examples, the models of the attention views, their tokenizer and the view settings.
void load_view_inputs(ReportContext& ctx);

// Stage 4. Every example's attention views into the page: its data, the attribution trees and the note.
void add_views(const ReportContext& ctx, PageParts& page);

// Stage 5. Writes the page to report.out.
void write_report(const ReportContext& ctx, const PageParts& page);

}  // namespace hp::analysis
