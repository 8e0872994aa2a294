// The static panels of `prune report` (analysis/report/README.md), read from the folders the user names:
// a pruning run (run.h5 with curves and importance, summary.json with the exactly-N result and speedup),
// an analysis (analysis.json, role_map.svg, head_map.svg from `prune analyze`) and gated training runs
// (run.h5 with gates/p_open). Each panel is HTML with inline SVG figures, or a note saying what is
// missing and how to get it. No JavaScript is needed to see them.
#pragma once

#include <string>

#include <nlohmann/json.hpp>
#include <vector>

namespace hp::analysis {

struct ReportFolders {
  std::string pruning;  // a `prune` run (summary.json or run.h5 with curves/); "" = none
  std::string analysis;  // a `prune analyze` output (analysis.json); "" = none
  std::vector<std::string> gated;  // run.h5 files holding gates/p_open (the folders or their sub-folders)
  // What the folders say about the models and the task ("" when they say nothing).
  std::string task, finetuned_model, analysed_model, slim_model;
};

// Sorts the named folders by what they hold (none: every static panel is a note). InputError naming a folder that does not exist or holds no
// headprune output, or two folders of the same kind.
ReportFolders classify_folders(const std::vector<std::string>& dirs);

struct Panel {
  std::string id;  // "summary", "curves", ... (the section is #panel-<id>)
  std::string title;
  std::string html;  // figures and tables, or <p class="note">
};

// summary, curves, importance, roles, headmap, gates, in page order. `models`: lines for the summary.
std::vector<Panel> static_panels(const ReportFolders& f, const std::vector<std::string>& models);

// `svg` wrapped as <figure class="fig" id="fig-<id>"> with a caption; ids inside the SVG (markers,
// gradients) get "-<id>" appended so that several copies in one page do not collide.
std::string figure(const std::string& id, const std::string& svg, const std::string& caption);
std::string note(const std::string& text);
// An HTML table (no header row when every `head` entry is empty), every cell escaped.
std::string table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows);
// A --max-drop run's frontier (summary.json's frontier, `s`, read from `path`): every candidate's metric against
// its measured speedup, the Pareto front, ONNX Runtime's points and the choice; "" without one.
std::string frontier_figure(const std::string& path, const nlohmann::json& s);
// The JSON of `path`; InputError naming the file when it is not JSON.
nlohmann::json read_json(const std::string& path);

}  // namespace hp::analysis
