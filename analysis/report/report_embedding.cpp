// The report's panels for an embedding run (see analysis/report/report_embedding.h).
#include "analysis/report/report_embedding.h"

#include <cstdio>
#include <map>
#include <vector>

#include "analysis/report/report_panels.h"
#include "core/plot/plot.h"

namespace hp::analysis {

using json = nlohmann::json;

namespace {

std::string num(const json& v, const char* f = "%.2f") {
  char buf[48];
  std::snprintf(buf, sizeof buf, f, v.get<double>());
  return buf;
}

// "86.74 (unpruned 86.72, +0.02)"
std::string against(const json& now, const json& before) {
  char d[32];
  std::snprintf(d, sizeof d, "%+.2f", now.get<double>() - before.get<double>());
  return num(now) + " (unpruned " + num(before) + ", " + d + ")";
}

}  // namespace

bool is_embedding_summary(const json& summary) { return summary.value("objective", "") == "embedding"; }

std::string embedding_summary(const std::string& path, const json& s) {
  if (!s.contains("final")) return note(path + " has no final result: a --max-drop run with no candidate within D.");
  const json& fin = s["final"];
  const json& base = s.at("unpruned");
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"model", s.value("model", "") + " (sentence-transformers; the unpruned model is the teacher)"});
  std::string method = s.contains("criterion")  ? "heads by " + s["criterion"].get<std::string>()
                       : s.contains("gates")    ? "Hard-Concrete gates"
                       : s.contains("frontier") ? "the frontier's choice"
                                                : "Kwon et al.'s search";
  if (s.contains("chosen")) method += ", step " + s["chosen"].get<std::string>();
  rows.push_back({"method", method});
  if (s.contains("structure")) {
    const json& k = s["structure"];
    rows.push_back({"kept", std::to_string(k.value("heads_kept", 0L)) + " heads, " +
                                std::to_string(k.value("neurons_kept", 0L)) + " FFN neurons, " +
                                num(json(100 * k.value("flops_kept", 0.0)), "%.0f") + "% of the encoder's FLOPs"});
  }
  rows.push_back({"cosine Spearman, " + s.value("eval_split", "dev") + " (reported)",
                  against(fin.at("spearman"), base.at("spearman"))});
  rows.push_back({"cosine Spearman, " + s.value("select_split", "") + " (choices)",
                  against(fin.at("select_spearman"), base.at("select_spearman"))});
  rows.push_back(
      {"mean cosine to the teacher (evaluation / selection)",
       num(fin.at("mean_cosine_to_teacher"), "%.4f") + " / " + num(fin.at("select_cosine_to_teacher"), "%.4f")});
  if (s.contains("latency")) {
    const json& l = s["latency"];
    rows.push_back(
        {"speedup, batch " + std::to_string(l.value("batch", 0L)) + " x " + std::to_string(l.value("seq", 0L)),
         num(l.at("speedup")) + "× (" + num(l.at("unpruned_ms"), "%.1f") + " → " + num(l.at("pruned_ms"), "%.1f") +
             " ms, fp32)"});
  }
  if (s.contains("export"))
    rows.push_back({"export", s["export"].value("dir", "") + " (SentenceTransformer loads it)"});
  return "<h3>Embedding result</h3>" + table({}, rows);
}

std::string embedding_curves(const std::string& path, const json& s) {
  std::string html;
  if (s.contains("curves") && s["curves"].is_array() && !s["curves"].empty()) {
    core::LineChart c;
    c.title = s.value("task", "") + ": cosine Spearman (" + s.value("eval_split", "dev") + ") vs heads pruned";
    c.x_label = "heads pruned", c.y_label = "cosine Spearman";
    c.y_ref = s.at("unpruned").at("spearman").get<double>(), c.y_ref_label = "unpruned";
    std::map<std::string, size_t> at;
    for (const auto& p : s["curves"]) {
      const std::string crit = p.at("criterion").get<std::string>();
      if (!at.count(crit)) at[crit] = c.series.size(), c.series.push_back({crit});
      auto& series = c.series[at[crit]];
      series.x.push_back(p.at("pruned").get<double>()), series.y.push_back(p.at("spearman").get<double>());
    }
    html += figure("embedding-curves", core::svg_line_chart(c),
                   "The embedding's cosine Spearman on " + s.value("eval_split", "dev") +
                       " after removing the heads each criterion ranks least important (the teacher slimmed, no "
                       "recovery); the run chose on the " +
                       s.value("select_split", "selection") + " pairs.");
  }
  html += frontier_figure(path, s);
  if (!html.empty()) return html;
  return note(path +
              ": this embedding run has no curves; `prune --config configs/sts_embed.yaml --target-heads N` "
              "draws the criteria's, `--max-drop D` the frontier.");
}

}  // namespace hp::analysis
