// `prune report` (see analysis/report/report.h).
#include "analysis/report/report.h"

#include <torch/types.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/report/report_assets.h"  // generated from analysis/report/report.{js,css}
#include "analysis/report/report_views.h"
#include "core/data/file_task.h"
#include "core/io/checkpoint.h"
#include "core/data/task_options.h"
#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/xml.h"
#include "core/data/glue.h"
#include "core/base/log.h"
#include "core/text/tokenizer.h"
#include "core/plot/plot.h"

namespace hp::analysis {

namespace fs = std::filesystem;
using core::xml_escape;
using nlohmann::json;

namespace {

// JSON text safe inside <script>: "</" cannot end the element early.
std::string script_json(const json& j) {
  std::string s = j.dump();
  std::string o;
  o.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' && i + 1 < s.size() && s[i + 1] == '/') o += "<\\/", ++i;
    else o += s[i];
  }
  return o;
}

std::vector<NamedExample> pick_examples(const core::Config& cfg, const core::TaskSpec& task) {
  const auto& r = cfg.report;
  std::vector<NamedExample> out;
  std::vector<int> ids = r.examples;
  if (ids.empty())
    for (int i = 0; i < r.count; ++i) ids.push_back(i);
  if (!ids.empty()) {
    const auto rows = core::read_task(task, core::data_root_for(cfg.data), r.split);
    for (int id : ids) {
      if (id >= static_cast<int>(rows.size())) {
        if (!r.examples.empty())
          throw ConfigError("report.examples holds " + std::to_string(id) + " but " + task.name + "/" + r.split +
                            " has " + std::to_string(rows.size()) + " rows; use 0.." + std::to_string(rows.size() - 1));
        break;  // the default first `count` rows of a shorter split
      }
      out.push_back({r.split + " #" + std::to_string(id), rows[id]});
    }
  }
  if (!r.text.empty()) {
    core::Example e;
    e.text_a = r.text, e.text_b = r.text_b;
    out.push_back({"text", e});
  }
  if (!r.texts.empty()) {
    std::ifstream in(r.texts);
    if (!in) throw InputError(r.texts + ": cannot read report.texts; pass a text file with one example per line");
    std::string line;
    for (int no = 1; std::getline(in, line); ++no) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      core::Example e;
      const auto tab = line.find('\t');
      e.text_a = line.substr(0, tab);
      if (tab != std::string::npos) e.text_b = line.substr(tab + 1);
      if (!e.text_b.empty() && e.text_b.find('\t') != std::string::npos)
        throw InputError(r.texts + ":" + std::to_string(no) +
                         ": more than one tab; use one tab between the two sentences of a pair");
      out.push_back({r.texts + ":" + std::to_string(no), e});
    }
  }
  const bool pair = !task.columns.text_b_name.empty() || task.columns.text_b_index >= 0;
  if (!out.empty() && !pair)
    for (const auto& e : out)
      if (!e.ex.text_b.empty())
        throw InputError(e.name + " has a second sentence but " + task.name +
                         " takes single sentences; drop the tab / report.text_b");
  return out;
}

// The task: the folders' own, unless data.task was set to something else.
std::string resolve_task(const core::Config& cfg, const ReportFolders& f) {
  if (f.task.empty()) return cfg.data.task;
  if (cfg.data.task != core::Config{}.data.task && cfg.data.task != f.task)
    throw ConfigError("data.task = " + cfg.data.task + " but the folders are a " + f.task +
                      " run; drop --task or pass folders of " + cfg.data.task);
  return f.task;
}

// The task of the folders: a user's files when data.train_file names them (a run on files records the task
// "files", which names no table row), else resolve_task's.
const core::TaskSpec& report_task(const core::Config& cfg, const ReportFolders& f) {
  if (cfg.data.from_files()) return core::task_of(cfg.data, cfg.model.path);
  if (f.task == "files")
    throw ConfigError("the folders are a run on your own files (data.train_file); pass prune report the same "
                      "--train-file and --validation-file");
  return core::find_task(resolve_task(cfg, f));
}

}  // namespace

// report.js with the attention views (report_views.js) at its "/* @views */" line: one function, its helpers shared.
std::string report_script() {
  const std::string js = kReportJs, marker = "/* @views */";
  const auto at = js.find(marker);
  HP_CHECK(at != std::string::npos, "report.js has no /* @views */ line for report_views.js");
  return js.substr(0, at) + std::string(kReportViewsJs) + js.substr(at + marker.size());
}

std::string render_page(const PageParts& p) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data: blob:; "
       "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n"
    << "<title>" << xml_escape(p.title) << "</title>\n<style>\n"
    << kReportCss << "\n</style>\n</head>\n<body>\n"
    << "<header><h1>" << xml_escape(p.title) << "</h1><nav>";
  const std::vector<std::pair<std::string, std::string>> dynamic = {
      {"attention", "Attention views"}, {"tree", "Attribution trees"}, {"rollout", "Attention rollout"}};
  for (const auto& panel : p.panels)
    o << "<a href=\"#panel-" << panel.id << "\">" << xml_escape(panel.title) << "</a> ";
  for (const auto& [id, title] : dynamic) o << "<a href=\"#panel-" << id << "\">" << title << "</a> ";
  o << "</nav></header>\n<main>\n";
  for (const auto& panel : p.panels)
    o << "<section id=\"panel-" << panel.id << "\" class=\"panel\"><h2>" << xml_escape(panel.title) << "</h2>\n"
      << panel.html << "\n</section>\n";
  const std::string no_script =
      "<noscript><p class=\"note\">The attention views need JavaScript; the panels above are static.</p></noscript>";
  const std::string top = p.attention_note.empty() ? "" : note(p.attention_note);
  o << "<section id=\"panel-attention\" class=\"panel\"><h2>Attention views</h2>\n"
    << top << no_script << "<div id=\"attention-root\"></div>\n</section>\n";
  o << "<section id=\"panel-tree\" class=\"panel\"><h2>Attribution trees</h2>\n";
  bool any_tree = false;
  for (size_t k = 0; k < p.trees.size(); ++k) {
    if (p.trees[k].second.empty()) continue;
    any_tree = true;
    o << "<div class=\"tree\" data-example=\"" << k << "\">"
      << figure("tree-" + std::to_string(k), p.trees[k].second,
                "Hao et al.'s attribution tree of " + p.trees[k].first +
                    ": how information flows to the prediction, layer by layer (analysis/DEFINITIONS.md §10).")
      << "</div>\n";
  }
  if (!any_tree)
    o << note(p.trees.empty()
                  ? "No examples chosen (report.examples, report.text)."
                  : "Attribution trees were not computed (report.trees = false, or the model has no classifier).");
  o << "</section>\n";
  o << "<section id=\"panel-rollout\" class=\"panel\"><h2>Attention rollout</h2>\n"
    << top << no_script << "<div id=\"rollout-root\"></div>\n</section>\n";
  o << "</main>\n<script type=\"application/json\" id=\"hp-data\">" << p.data_json << "</script>\n<script>\n"
    << report_script() << "\n</script>\n</body>\n</html>\n";
  return o.str();
}

void resolve_report(ReportContext& ctx, const core::Config& cfg) {
  const auto& r = cfg.report;
  if (r.runs.empty() && r.model.empty())
    throw ConfigError(
        "prune report: name the folders to show (a pruning run, an analysis, gated runs), or --model DIR "
        "for the attention views alone");
  ctx.cfg = &cfg;
  ctx.folders = classify_folders(r.runs);
  const ReportFolders& f = ctx.folders;
  ctx.task = &report_task(cfg, f);
  ctx.model_dir = !r.model.empty()             ? r.model
                  : !f.finetuned_model.empty() ? f.finetuned_model
                  : !f.analysed_model.empty()  ? f.analysed_model
                                               : cfg.model.path;
  ctx.slim_dir = r.slim == "none" ? "" : !r.slim.empty() ? r.slim : f.slim_model;
  ctx.out = r.out.empty() ? cfg.run.out_dir + "/report.html" : r.out;
}

PageParts static_page(const ReportContext& ctx) {
  const ReportFolders& f = ctx.folders;
  std::vector<std::string> models = {"task: " + ctx.task->name, "model of the attention views: " + ctx.model_dir};
  if (!ctx.slim_dir.empty()) models.push_back("slimmed model beside it: " + ctx.slim_dir);
  for (const auto& [what, dir] : {std::pair{"pruning run", f.pruning}, std::pair{"analysis", f.analysis}})
    if (!dir.empty()) models.push_back(std::string(what) + ": " + dir);
  for (const auto& g : f.gated) models.push_back("gated run: " + g);
  PageParts page;
  page.title = "headprune report: " + ctx.task->name;
  page.panels = static_panels(f, models);
  return page;
}

void load_view_inputs(ReportContext& ctx) {
  const core::Config& cfg = *ctx.cfg;
  ctx.examples = pick_examples(cfg, *ctx.task);
  const core::LoadOptions load = core::task_load_options(*ctx.task, cfg.run.seed);
  ctx.model.emplace(core::load_bert(ctx.model_dir, load, &ctx.loaded));
  core::check_max_seq_len(ctx.model->config(), cfg.data.max_seq_len);
  if (!ctx.slim_dir.empty()) ctx.slim.emplace(core::load_bert(ctx.slim_dir, load));
  if (ctx.slim && ctx.slim->config().num_hidden_layers < ctx.model->config().num_hidden_layers) {
    // Whole layers removed (--target-layers, layer gates): the views pair each layer with the slimmed model's own.
    core::log_warn("report", ctx.slim_dir + " keeps " + std::to_string(ctx.slim->config().num_hidden_layers) + " of " +
                                 std::to_string(ctx.model->config().num_hidden_layers) +
                                 " layers: the attention views show the unpruned model alone (the run's tables and "
                                 "curves are drawn)");
    ctx.slim.reset();
  }
  ctx.tok.emplace(core::Tokenizer::from_model_dir(ctx.model_dir));
  ctx.views.max_seq_len = cfg.data.max_seq_len;
  ctx.views.tree = cfg.report.trees && !ctx.loaded.classifier_initialized;
  ctx.views.steps = cfg.prune.attattr_steps;
  ctx.views.riemann = cfg.prune.attattr_riemann;
  ctx.views.threshold = cfg.explain.threshold;
}

void add_views(const ReportContext& ctx, PageParts& page) {
  if (ctx.loaded.classifier_initialized)
    page.attention_note = ctx.model_dir + " has no classifier for " + ctx.task->name +
                          ": predictions are those of a random classifier and no attribution trees are drawn.";
  const auto& mc = ctx.model->config();
  json data;
  data["format"] = "headprune-report/1";
  data["encoding"] =
      "attention and rollout: 8-bit (p = q/255); query/key vectors: int8 with one scale per head; "
      "each array zlib-compressed and base64-encoded. Lines below p = 0.012 are not drawn.";
  data["layers"] = mc.num_hidden_layers;
  data["heads"] = mc.num_attention_heads;
  data["head_dim"] = mc.head_dim();
  data["has_slim"] = ctx.slim.has_value();
  data["pruned"] = json::array();
  data["examples"] = json::array();
  core::Progress progress("report", static_cast<long>(ctx.examples.size()));
  for (size_t k = 0; k < ctx.examples.size(); ++k) {
    const auto& [name, ex] = ctx.examples[k];
    const ExampleView v =
        view_example(*ctx.model, ctx.slim ? &*ctx.slim : nullptr, *ctx.tok, *ctx.task, ex, name, ctx.views);
    if (k == 0)
      for (int l = 0; l < v.L; ++l)
        for (int h = 0; h < v.H; ++h) {
          const size_t i = static_cast<size_t>(l) * v.H + h;
          if (!v.kept[i] || (v.has_slim && !v.slim_kept[i])) data["pruned"].push_back({l, h});
        }
    data["examples"].push_back(view_json(v));
    page.trees.emplace_back(v.name, v.tree_svg);
    progress.update(static_cast<long>(k + 1), v.name);
  }
  progress.finish();
  page.data_json = script_json(data);
}

void write_report(const ReportContext& ctx, const PageParts& page) {
  const std::string html = render_page(page);
  if (fs::path(ctx.out).has_parent_path()) fs::create_directories(fs::path(ctx.out).parent_path());
  core::write_file_atomic(ctx.out, html);
  char size[32];
  std::snprintf(size, sizeof size, "%.2f MB", html.size() / 1e6);
  core::log_info("report",
                 "wrote " + ctx.out + " (" + size + ", " + std::to_string(ctx.examples.size()) + " examples)");
}

}  // namespace hp::analysis
