// The static panels of `prune report` (see analysis/report/report_panels.h).
#include "analysis/report/report_panels.h"

#include <torch/types.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "analysis/stats.h"
#include "eval/results_schema.h"
#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/xml.h"
#include "core/io/tensor_io.h"
#include "prune/record/budget_report.h"
#include "prune/record/frontier.h"
#include "core/plot/plot.h"

namespace hp::analysis {

namespace fs = std::filesystem;
using core::xml_escape;
using nlohmann::json;
namespace results = eval::results;

namespace {

bool has_key_prefix(const core::TensorMap& m, const std::string& prefix) {
  auto it = m.lower_bound(prefix);
  return it != m.end() && it->first.rfind(prefix, 0) == 0;
}

std::string fmt(double v, const char* f = "%.4g") {
  char buf[48];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::vector<double> values(const torch::Tensor& t) {
  const auto c = t.to(torch::kFloat64).contiguous().flatten();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

// The run.h5 of `dir` (already read: `own`) and of its immediate sub-folders that hold gate trajectories.
std::vector<std::string> gated_files(const std::string& dir, const core::TensorMap& own) {
  std::vector<std::string> out;
  if (has_key_prefix(own, results::prefix(results::Dataset::kGatePOpen))) out.push_back(dir + "/run.h5");
  std::vector<fs::path> subs;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && fs::exists(e.path() / "run.h5")) subs.push_back(e.path() / "run.h5");
  std::sort(subs.begin(), subs.end());
  for (const auto& s : subs)
    if (has_key_prefix(core::read_hdf5(s.string()), results::prefix(results::Dataset::kGatePOpen)))
      out.push_back(s.string());
  return out;
}

// A labelled square matrix of values in [-1, 1] (blue negative, red positive), each cell printed.
std::string svg_correlation(const std::string& title, const std::vector<std::string>& names,
                            const std::vector<std::vector<double>>& r) {
  const size_t n = names.size();
  const double cell = 56, left = 100, top = 50, W = left + cell * n + 20, H = top + cell * n + 20;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">" << xml_escape(title)
    << "</text>\n";
  for (size_t i = 0; i < n; ++i) {
    o << "<text x=\"" << left - 6 << "\" y=\"" << top + cell * i + cell / 2 + 4 << "\" text-anchor=\"end\">"
      << xml_escape(names[i]) << "</text>\n"
      << "<text x=\"" << left + cell * i + cell / 2 << "\" y=\"" << top - 6 << "\" text-anchor=\"middle\">"
      << xml_escape(names[i]) << "</text>\n";
    for (size_t j = 0; j < n; ++j) {
      const double v = r[i][j], t = std::isnan(v) ? 0 : std::clamp(v, -1.0, 1.0);
      const int a = static_cast<int>(255 - 200 * std::fabs(t));
      char fill[16];
      std::snprintf(fill, sizeof fill, "#%02x%02x%02x", t > 0 ? 255 : a, a, t < 0 ? 255 : a);
      o << "<rect x=\"" << left + cell * j << "\" y=\"" << top + cell * i << "\" width=\"" << cell << "\" height=\""
        << cell << "\" fill=\"" << fill << "\" stroke=\"white\"/><text x=\"" << left + cell * j + cell / 2 << "\" y=\""
        << top + cell * i + cell / 2 + 4 << "\" text-anchor=\"middle\">" << (std::isnan(v) ? "–" : fmt(v, "%.2f"))
        << "</text>\n";
    }
  }
  o << "</svg>\n";
  return o.str();
}

// An SVG file written by headprune, for inlining (it starts at <svg ...>); "" when missing.
std::string svg_file(const std::string& path) {
  if (!fs::exists(path)) return "";
  std::string s = core::read_file(path);
  const auto at = s.find("<svg");
  return at == std::string::npos ? "" : s.substr(at);
}

// A budget run's rows: the budget and what it kept, the metric after each step of the search, its times.
std::vector<std::vector<std::string>> budget_rows(const json& b, const std::string& metric) {
  std::vector<std::vector<std::string>> rows;
  const std::string unit = b.value("unit", std::string("FLOPs"));
  rows.push_back({"budget", fmt(100 * b.value("target", 0.0), "%.1f") + "% of the " +
                                (unit == "latency" ? "model's latency" : "encoder's " + unit) + ", kept " +
                                fmt(100 * b.value("kept", 0.0), "%.1f") + "%"});
  if (b.contains("latency") && b["latency"].contains("measured")) {
    const json& l = b["latency"];
    rows.push_back({"latency, batch " + fmt(l.value("batch", 0.0), "%.0f") + " x " + fmt(l.value("seq", 0.0), "%.0f"),
                    "target " + fmt(l.value("target", 0.0), "%.2f") + " ms, predicted " +
                        fmt(l.value("predicted", 0.0), "%.2f") + " ms, measured " +
                        fmt(l.value("measured", 0.0), "%.2f") + " ms"});
  }
  std::string widths;
  for (const auto& w : b.value("ffn_widths", json::array())) widths += (widths.empty() ? "" : ", ") + w.dump();
  rows.push_back({"FFN neurons kept", std::to_string(b.value("neurons_kept", 0)) + " of " +
                                          std::to_string(b.value("neurons_total", 0)) + " (per layer: " + widths + ")"});
  for (const auto& [key, what] : {std::pair<std::string, std::string>{"hidden", "hidden channels kept"}, {"layers", "whole layers kept"}})
    if (b.value(key + "_total", 0) > 0)
      rows.push_back({what, std::to_string(b.value(key + "_kept", 0)) + " of " + std::to_string(b.value(key + "_total", 0))});
  for (const std::string step : {"search", "searched", "rearranged", "tuned", "recovered"})  // the embedding's: searched
    if (b.contains("metrics_by_step") && b["metrics_by_step"].contains(step) &&
        b["metrics_by_step"][step].contains(metric)) {
      const bool search = step == "search" || step == "searched";
      rows.push_back({metric + " after the " + (search ? "Fisher search" : step + " step"),
                      fmt(b["metrics_by_step"][step][metric].get<double>())});
    }
  std::string times;
  const json seconds = b.value("seconds", json::object());  // items() of a temporary would dangle
  for (const auto& [step, sec] : seconds.items())
    times += (times.empty() ? "" : ", ") + step + " " + fmt(sec.get<double>(), "%.1f") + " s";
  if (!times.empty()) rows.push_back({"search time", times});
  return rows;
}

std::string summary_panel(const ReportFolders& f, const std::vector<std::string>& models) {
  std::ostringstream o;
  o << "<ul class=\"models\">";
  for (const auto& m : models) o << "<li>" << xml_escape(m) << "</li>";
  o << "</ul>";
  if (f.pruning.empty())
    return o.str() +
           note(
               "No pruning run among the folders: the exactly-N result and speedup come from `prune --config CONFIG --target-heads N`.");
  const std::string path = f.pruning + "/summary.json";
  if (!fs::exists(path))
    return o.str() +
           note(
               f.pruning +
               " has no summary.json: the pruning run has not finished; run the same `prune` command again to resume it.");
  const json s = read_json(path);
  if (!s.contains("final"))
    return o.str() + note(path + " has no exactly-N result (the run had no prune.target_heads).");
  const json& fin = s["final"];
  const std::string metric = s.value("metric", "metric");
  std::vector<std::vector<std::string>> rows;
  rows.push_back(
      {"heads kept", std::to_string(fin.value("heads_kept", 0)) + " of " + std::to_string(s.value("heads_total", 0))});
  rows.push_back({"method", fin.value("method", "") +
                                (fin.contains("criterion") ? " (" + fin["criterion"].get<std::string>() + ")" : "")});
  if (fin.contains("metrics") && fin["metrics"].contains(metric))
    rows.push_back({metric + " (dev)", fmt(fin["metrics"][metric].get<double>())});
  if (fin.contains("metrics_before_recovery") && fin["metrics_before_recovery"].contains(metric))
    rows.push_back({metric + " before recovery", fmt(fin["metrics_before_recovery"][metric].get<double>())});
  if (fin.contains("params"))
    rows.push_back({"parameters", std::to_string(fin["params"].get<long>()) + " (unpruned " +
                                      std::to_string(fin.value("params_unpruned", 0L)) + ")"});
  if (fin.contains("latency"))
    for (const auto& [batch, l] : fin["latency"].items())
      rows.push_back({"speedup, " + batch + " (seq " + std::to_string(l.value("seq", 0)) + ")",
                      fmt(l.value("speedup", 0.0), "%.2f") + "× (" + fmt(l.value("unpruned_ms", 0.0), "%.1f") + " → " +
                          fmt(l.value("slim_ms", 0.0), "%.1f") + " ms; FLOP bound " +
                          fmt(l.value("flop_bound", 0.0), "%.2f") + "×)"});
  if (fin.contains("hf_check")) {  // one line per loader (older runs: one string)
    if (fin["hf_check"].is_string()) rows.push_back({"Hugging Face check", fin["hf_check"].get<std::string>()});
    else
      for (const auto& [loader, result] : fin["hf_check"].items())
        rows.push_back({"Hugging Face check, " + loader, result.get<std::string>()});
  }
  const bool layers = fin.contains("layers");
  if (fin.contains("mask")) rows.push_back({layers ? "removed" : "heads removed", fin["mask"].get<std::string>()});
  if (fin.contains("budget") && fin["budget"].is_object()) {
    auto more = budget_rows(fin["budget"], metric);
    rows.insert(rows.begin() + 2, more.begin(), more.end());
  }
  long at = 2;  // --target-layers: each choice's layers and metric with the others removed, before recovery
  if (layers)
    for (const auto& [choice, c] : fin["layers"]["choices"].items())
      rows.insert(rows.begin() + at++, {"layers kept by " + choice, c["kept"].dump() + ", " + metric + " " +
                                                                     fmt(c["metrics"].value(metric, 0.0)) +
                                                                     " before recovery"});
  return o.str() +
         (fin.contains("budget") ? "<h3>Budget result</h3>" : layers ? "<h3>Whole-layer result</h3>" : "<h3>Exactly-N result</h3>") +
         table({}, rows);
}

// summary.json's section `key` as T, or InputError naming the file (`path`) and the section.
template <class T>
T summary_part(const std::string& path, const json& s, const char* key) {
  try {
    return s.at(key).get<T>();
  } catch (const json::exception& e) {
    throw InputError(path + ": " + key + " is not what `prune` writes (" + e.what() +
                     "); rerun the pruning command that wrote it");
  }
}

// A budget run's curves (summary.json's budget_curves): the metric against the unit kept and against the
// measured speedup; "" for a run without a budget.
std::string budget_figures(const ReportFolders& f) {
  const std::string path = f.pruning + "/summary.json";
  if (!fs::exists(path)) return "";
  const json s = read_json(path);
  if (!s.contains("budget_curves")) return frontier_figure(path, s);
  const auto c = summary_part<prune::BudgetCurves>(path, s, "budget_curves");
  std::string html = figure("budget-curves", core::svg_line_chart(prune::budget_chart(c)),
                            "The " + c.metric + " on " + c.split + " after each method keeps the heads and FFN neurons "
                            "that fit each budget (Kwon et al. 2022's search, its steps, and baselines at the search's "
                            "counts), beside the best head-only criterion; bands: 95% bootstrap interval.");
  if (const auto pareto = prune::pareto_chart(c))
    html += figure("pareto", core::svg_line_chart(*pareto),
                   "The same points against the speedup measured at batch " + std::to_string(c.latency_batch) +
                       " over the unpruned model: up and to the right is better.");
  return html + frontier_figure(path, s);
}

std::string curves_panel(const ReportFolders& f, const core::TensorMap& run) {
  if (f.pruning.empty()) return note("No pruning run among the folders: curves come from `prune --config CONFIG`.");
  const std::string summary = f.pruning + "/summary.json";
  const std::string curves = results::prefix(results::Dataset::kCurveStat);
  if (!has_key_prefix(run, curves) && fs::exists(summary) && !read_json(summary).contains("criteria"))
    return note(f.pruning + " drew no head curves (a run of a budget or the gates alone): `--target-heads N` draws "
                            "them") +
           budget_figures(f);
  if (!has_key_prefix(run, curves))
    return note(
        f.pruning +
        " has no curves (run.h5 missing or without curves/): the pruning run has not finished; run the same `prune` command again to resume it.");
  const auto attrs = core::read_hdf5_attrs(f.pruning + "/run.h5");
  const std::string metric = attrs.count("metric") ? attrs.at("metric") : "metric";
  core::LineChart c;
  c.title = (attrs.count("task") ? attrs.at("task") + ": " : "") + metric + " vs heads pruned (95% bootstrap band)";
  c.x_label = "heads pruned";
  c.y_label = metric;
  std::map<std::string, std::vector<double>>
      x;  // per criterion, its first seed's heads pruned (the same schedule for all)
  for (auto it = run.lower_bound(curves); it != run.end() && it->first.rfind(curves, 0) == 0; ++it) {
    const auto key = results::parse_key(it->first);
    if (key && key->kind == results::Dataset::kCurveSeries && key->last == results::kHeadsPruned &&
        !x.count(key->criterion))
      x[key->criterion] = values(it->second);
  }
  for (auto it = run.lower_bound(curves); it != run.end() && it->first.rfind(curves, 0) == 0; ++it) {
    const auto key = results::parse_key(it->first);
    if (!key || key->kind != results::Dataset::kCurveStat || key->last != "mean" || !x.count(key->criterion)) continue;
    const std::string& crit = key->criterion;
    core::Series s{crit, x.at(crit), values(it->second), values(run.at(results::curve_stat_key(crit, "ci_lo"))),
                    values(run.at(results::curve_stat_key(crit, "ci_hi")))};
    if (!s.y.empty() && std::isnan(c.y_ref)) c.y_ref = s.y[0], c.y_ref_label = "unpruned";
    c.series.push_back(std::move(s));
  }
  return figure("curves", core::svg_line_chart(c),
                "Mean over seeds of the dev " + metric +
                    " after masking the heads each criterion ranks least important; "
                    "bands: 95% bootstrap interval over the dev examples.") +
         budget_figures(f);
}

std::string importance_panel(const ReportFolders& f, const core::TensorMap& run) {
  const std::string importance = results::prefix(results::Dataset::kImportance);
  if (f.pruning.empty() || !has_key_prefix(run, importance))
    return note(f.pruning.empty() ? "No pruning run among the folders: importance comes from `prune --config CONFIG`."
                                  : f.pruning + "/run.h5 holds no importance scores yet: the run has not finished.");
  std::ostringstream o;
  std::vector<std::string> names;
  std::vector<std::vector<double>> scores;
  for (auto it = run.lower_bound(importance); it != run.end() && it->first.rfind(importance, 0) == 0; ++it) {
    const std::string crit = results::parse_key(it->first)->criterion;
    const auto t = it->second.to(torch::kFloat64).contiguous();
    core::Heatmap m;
    m.title = "importance: " + crit;
    for (long l = 0; l < t.size(0); ++l) m.values.push_back(values(t[l]));
    o << figure("importance-" + crit, core::svg_heatmap(m),
                crit + ": importance of each head in the unpruned model (darker = more important).");
    names.push_back(crit);
    scores.push_back(values(t));
  }
  std::vector<std::vector<double>> r(names.size(), std::vector<double>(names.size()));
  for (size_t i = 0; i < names.size(); ++i)
    for (size_t j = 0; j < names.size(); ++j) r[i][j] = spearman(scores[i], scores[j]);
  o << figure("rank-correlation", svg_correlation("Spearman rank correlation between criteria", names, r),
              "Spearman ρ between the criteria's importance over all heads (ties share average ranks).");
  return o.str();
}

std::string roles_panel(const ReportFolders& f) {
  if (f.analysis.empty())
    return note(
        "No `prune analyze` output among the folders: roles come from `prune analyze --model DIR --task TASK --out DIR`.");
  const json a = read_json(f.analysis + "/analysis.json");
  std::ostringstream o;
  const std::string map = svg_file(f.analysis + "/role_map.svg");
  o << (map.empty() ? note(f.analysis + " has no role_map.svg; rerun `prune analyze`.")
                    : figure("role-map", map, "Roles of each head after Holm's correction (analysis/DEFINITIONS.md)."));
  if (!a.contains("summary") || !a["summary"].contains("heads_per_role"))
    return o.str() + note(f.analysis + "/analysis.json has no role summary.");
  const json* kept = nullptr;
  if (a.contains("prune_run") && a["prune_run"].contains("slim_model"))
    kept = &a["prune_run"]["slim_model"]["roles_kept"];
  std::vector<std::vector<std::string>> rows;
  for (const auto& [role, c] : a["summary"]["heads_per_role"].items()) {
    std::string heads;
    if (a.contains("roles") && a["roles"].contains(role))
      for (size_t l = 0; l < a["roles"][role]["holm"].size(); ++l)
        for (size_t h = 0; h < a["roles"][role]["holm"][l].size(); ++h)
          if (a["roles"][role]["holm"][l][h].is_number() && a["roles"][role]["holm"][l][h].get<double>() > 0.5)
            heads += (heads.empty() ? "" : " ") + std::to_string(l) + "-" + std::to_string(h);
    std::vector<std::string> row = {role, std::to_string(c.value("raw", 0)), std::to_string(c.value("holm", 0)),
                                    std::to_string(c.value("bh", 0))};
    if (kept) row.push_back(kept->contains(role) ? std::to_string((*kept)[role].value("kept", 0)) : "");
    row.push_back(heads);
    rows.push_back(row);
  }
  std::vector<std::string> head = {"role", "heads (raw p)", "Holm", "Benjamini–Hochberg"};
  if (kept) head.push_back("kept by the slimmed model");
  head.push_back("heads (Holm), layer-head");
  o << "<h3>Role table: raw vs corrected</h3>" << table(head, rows);
  if (a.contains("settings"))
    o << "<p class=\"caption\">" << xml_escape(a["settings"].value("source", ""))
      << "; α = " << fmt(a["settings"].value("alpha", 0.0)) << ", τ = " << fmt(a["settings"].value("tau", 0.0))
      << ".</p>";
  return o.str();
}

std::string headmap_panel(const ReportFolders& f) {
  if (f.analysis.empty())
    return note("No `prune analyze` output among the folders: the head map comes from `prune analyze`.");
  const std::string map = svg_file(f.analysis + "/head_map.svg");
  return map.empty()
             ? note(f.analysis + " has no head_map.svg; rerun `prune analyze`.")
             : figure(
                   "head-map", map,
                   "Clark et al.'s head map: multidimensional scaling of the Jensen–Shannon divergences between heads' attention.");
}

// Per-layer gate trajectories of a gated run under a budget ([E, L] datasets, one line per layer and kind), and with
// `hidden` the mean over the hidden-channel gates, as one chart titled `what`; empty when the run has none of them.
std::string structure_gates_chart(const core::TensorMap& run, const std::string& file, const std::vector<double>& steps,
                                  const std::string& what,
                                  const std::vector<std::pair<results::Dataset, const char*>>& kinds, bool hidden) {
  core::LineChart c;
  c.title = file + ": " + what + ", P(open)";
  c.x_label = steps.empty() ? "evaluation" : "step";
  c.y_label = "P(open)";
  auto add = [&](const std::string& name, const torch::Tensor& p) {  // p: [E]
    core::Series s{name, {}, values(p), {}, {}};
    for (size_t e = 0; e < s.y.size(); ++e)
      s.x.push_back(steps.size() == s.y.size() ? steps[e] : static_cast<double>(e));
    c.series.push_back(std::move(s));
  };
  for (const auto& [kind, label] : kinds) {
    const auto it = run.find(results::prefix(kind));
    if (it == run.end()) continue;
    const auto p = it->second.to(torch::kFloat64);  // [E, L]
    for (long l = 0; l < p.size(1); ++l) add("layer " + std::to_string(l) + " " + label, p.select(1, l));
  }
  if (const auto it = run.find(results::prefix(results::Dataset::kGateHiddenPOpen)); hidden && it != run.end())
    add("hidden (mean)", it->second.to(torch::kFloat64).mean(1));  // [E, D] → [E]; a short label fits the legend
  return c.series.empty() ? std::string() : core::svg_line_chart(c);
}

std::string gates_panel(const ReportFolders& f) {
  if (f.gated.empty())
    return note(
        "No gated run among the folders: gate trajectories come from `prune train --gates` or a pruning run with prune.method = gates.");
  std::ostringstream o;
  int k = 0;
  for (const auto& file : f.gated) {
    const auto run = core::read_hdf5(file);
    const auto p = run.at(results::prefix(results::Dataset::kGatePOpen)).to(torch::kFloat64);  // [E, L, H]
    const auto steps = run.count("eval/step") ? values(run.at("eval/step")) : std::vector<double>();
    for (long l = 0; l < p.size(1); ++l) {
      core::LineChart c;
      c.title = file + ": layer " + std::to_string(l) + ", P(gate open)";
      c.x_label = steps.empty() ? "evaluation" : "step";
      c.y_label = "P(open)";
      for (long h = 0; h < p.size(2); ++h) {
        core::Series s{"head " + std::to_string(h), {}, values(p.select(1, l).select(1, h)), {}, {}};
        for (size_t e = 0; e < s.y.size(); ++e)
          s.x.push_back(steps.size() == s.y.size() ? steps[e] : static_cast<double>(e));
        c.series.push_back(std::move(s));
      }
      o << figure("gates-" + std::to_string(k) + "-layer" + std::to_string(l), core::svg_line_chart(c),
                  "Probability that each Hard-Concrete gate of layer " + std::to_string(l) +
                      " is non-zero, at each evaluation.");
    }
    const std::string structures = structure_gates_chart(
        run, file, steps, "sublayer and FFN neuron gates",
        {{results::Dataset::kGateMhaPOpen, "attention"}, {results::Dataset::kGateFfnPOpen, "FFN"},
         {results::Dataset::kGateNeuronPOpen, "neurons"}},
        false);
    if (!structures.empty())
      o << figure("gates-" + std::to_string(k) + "-structures", structures,
                  "A FLOPs or parameter target's other gates (CoFi): each layer's attention and FFN sublayer gate, and "
                  "the mean over its FFN neuron gates; P(open) at each evaluation.");
    const std::string coarse = structure_gates_chart(run, file, steps, "layer and hidden-channel gates",
                                                     {{results::Dataset::kGateLayerPOpen, "whole layer"}}, true);
    if (!coarse.empty())
      o << figure("gates-" + std::to_string(k) + "-layers", coarse,
                  "Each whole layer's gate (gates.layer_gates: closed, the layer leaves the stack) and the mean over "
                  "the hidden-channel gates (gates.hidden_gates, one per channel shared by every layer); P(open) at "
                  "each evaluation.");
    ++k;
  }
  return o.str();
}

}  // namespace

std::string frontier_figure(const std::string& path, const json& s) {
  if (!s.contains("frontier")) return "";
  const auto f = summary_part<prune::Frontier>(path, s, "frontier");
  const std::string chosen =
      f.chosen >= 0 ? "the chosen model (" + prune::frontier_label(f.points.at(static_cast<size_t>(f.chosen))) + ")"
                    : "no candidate within the limit";
  return figure("frontier", core::svg_line_chart(prune::frontier_chart(f)),
                "Every candidate of `--max-drop` (head counts, budgets, precisions) with ONNX Runtime beside them (" +
                    f.onnxruntime + "): the " + f.metric + " on " + f.split +
                    " against the speedup over the unpruned "
                    "fp32 model at " +
                    f.timing +
                    ", log scale; the line is the Pareto front, the dashed line the "
                    "limit, and " +
                    chosen + " the fastest above it.");
}

json read_json(const std::string& path) {
  try {
    return json::parse(core::read_file(path));
  } catch (const json::exception& e) {
    throw InputError(path + ": not valid JSON (" + e.what() + "); rerun the command that wrote it");
  }
}

std::string table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) {
  std::ostringstream o;
  o << "<table>";
  if (std::any_of(head.begin(), head.end(), [](const std::string& h) { return !h.empty(); })) {
    o << "<thead><tr>";
    for (const auto& h : head) o << "<th>" << xml_escape(h) << "</th>";
    o << "</tr></thead>";
  }
  o << "<tbody>";
  for (const auto& r : rows) {
    o << "<tr>";
    for (const auto& c : r) o << "<td>" << xml_escape(c) << "</td>";
    o << "</tr>";
  }
  o << "</tbody></table>";
  return o.str();
}

std::string note(const std::string& text) { return "<p class=\"note\">" + xml_escape(text) + "</p>"; }

std::string figure(const std::string& id, const std::string& svg, const std::string& caption) {
  static const std::regex ids(R"re(id="([^"]+)")re"), urls(R"re(url\(#([^)]+)\))re"), hrefs(R"re(href="#([^"]+)")re");
  std::string s = std::regex_replace(svg, ids, "id=\"$1-" + id + "\"");
  s = std::regex_replace(s, urls, "url(#$1-" + id + ")");
  s = std::regex_replace(s, hrefs, "href=\"#$1-" + id + "\"");
  return "<figure class=\"fig\" id=\"fig-" + id + "\">" + s + "<figcaption>" + xml_escape(caption) +
         "</figcaption></figure>\n";
}

ReportFolders classify_folders(const std::vector<std::string>& dirs) {
  ReportFolders f;
  for (const auto& d : dirs) {
    if (!fs::is_directory(d))
      throw InputError(d + ": no such folder; pass folders written by `prune`, `prune train` or `prune analyze`");
    bool known = false;
    if (fs::exists(d + "/analysis.json")) {
      if (!f.analysis.empty())
        throw InputError(d + " and " + f.analysis +
                         " are both analyses; pass one (use `prune analyze --compare` to compare models)");
      f.analysis = d, known = true;
      const json a = read_json(d + "/analysis.json");
      if (a.contains("settings")) {
        f.analysed_model = a["settings"].value("model", "");
        if (f.task.empty()) f.task = a["settings"].value("task", "");
      }
    }
    const bool run_h5 = fs::exists(d + "/run.h5");
    const core::TensorMap run = run_h5 ? core::read_hdf5(d + "/run.h5") : core::TensorMap{};
    if (fs::exists(d + "/summary.json") || fs::exists(d + "/state/points") ||
        has_key_prefix(run, results::prefix(results::Dataset::kCurveStat))) {
      if (!f.pruning.empty()) throw InputError(d + " and " + f.pruning + " are both pruning runs; pass one per report");
      f.pruning = d, known = true;
      if (fs::exists(d + "/summary.json")) {
        const json s = read_json(d + "/summary.json");
        f.task = s.value("task", f.task);
        f.finetuned_model = s.value("finetuned_model", "");
      }
      if (fs::exists(d + "/model/config.json")) f.slim_model = d + "/model";
    }
    for (const auto& g : gated_files(d, run)) f.gated.push_back(g), known = true;
    if (!known)
      throw InputError(d +
                       ": holds no headprune output (no summary.json, run.h5 with curves or gates, or analysis.json); "
                       "pass a folder written by `prune`, `prune train --gates` or `prune analyze`");
  }
  return f;
}

std::vector<Panel> static_panels(const ReportFolders& f, const std::vector<std::string>& models) {
  const core::TensorMap run = f.pruning.empty() || !fs::exists(f.pruning + "/run.h5") ? core::TensorMap{}
                                                                                     : core::read_hdf5(f.pruning + "/run.h5");
  std::string summary;
  try {
    summary = summary_panel(f, models);
  } catch (const json::exception& e) {  // valid JSON, but a field of another type than the run writes (an edit)
    throw InputError(f.pruning + "/summary.json: a field is not what `prune` writes there (" + e.what() +
                     "); rerun the prune command that made the folder, or leave the folder out of the report");
  }
  return {{"summary", "Summary", summary},
          {"curves", "Pruning curves", curves_panel(f, run)},
          {"importance", "Head importance per criterion", importance_panel(f, run)},
          {"roles", "Head roles", roles_panel(f)},
          {"headmap", "Head map", headmap_panel(f)},
          {"gates", "Gate trajectories", gates_panel(f)}};
}

}  // namespace hp::analysis
