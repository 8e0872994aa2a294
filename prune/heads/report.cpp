// Pruning-run outputs (see prune/heads/report.h).
#include "prune/heads/report.h"

#include <sstream>

#include "core/base/files.h"
#include "core/model/head_mask.h"
#include "core/io/tensor_io.h"
#include "eval/evaluator.h"  // head_mask_tensor
#include "eval/results_schema.h"
#include "core/plot/plot.h"

namespace hp::prune {

std::map<std::string, double> largest_fraction_within(const std::vector<Aggregate>& aggregates, int total_heads,
                                                      double tolerance) {
  std::map<std::string, double> base, best;
  for (const auto& a : aggregates)
    if (a.pruned == 0 && !base.count(a.criterion)) base[a.criterion] = a.mean;
  for (const auto& a : aggregates) {
    if (!base.count(a.criterion)) continue;
    if (!best.count(a.criterion)) best[a.criterion] = 0;
    // The largest point whose mean metric is within the tolerance of the unpruned one.
    if (a.mean >= base[a.criterion] - tolerance)
      best[a.criterion] = std::max(best[a.criterion], a.pruned / double(total_heads));
  }
  return best;
}

std::map<std::string, double> curve_area(const std::vector<Aggregate>& aggregates, const std::string& metric) {
  std::map<std::string, double> sum, n;
  for (const auto& a : aggregates)
    sum[a.criterion] += metric.empty() ? a.mean : a.metrics.at(metric), n[a.criterion] += 1;
  for (auto& [c, s] : sum) s /= n[c];
  return sum;
}

namespace {

namespace results = eval::results;

// curves.csv: every point of every seed, plus the aggregate columns of its (criterion, point).
void write_curves_csv(const CurveReport& r) {
  const std::string metric = r.task->primary_metric;
  std::ostringstream csv;
  csv << "criterion,seed,step,heads_pruned,heads_kept,fraction_pruned";
  std::vector<std::string> names;
  for (const auto& [name, v] : r.points.empty() ? std::map<std::string, double>{} : r.points[0].metrics) {
    names.push_back(name);
    csv << "," << name;
  }
  csv << "," << metric << "_mean," << metric << "_ci_lo," << metric << "_ci_hi,params,flops_per_example,"
      << "eval_examples_per_s,latency_ms_b32,mask\n";
  std::map<std::pair<std::string, int>, const Aggregate*> agg;
  for (const auto& a : r.aggregates) agg[{a.criterion, a.pruned}] = &a;
  for (const auto& p : r.points) {
    const Aggregate& a = *agg.at({p.criterion, p.pruned});
    csv << p.criterion << "," << p.seed << "," << p.step << "," << p.pruned << "," << p.kept << ","
        << p.pruned / double(r.total_heads);
    for (const auto& n : names) csv << "," << p.metrics.at(n);
    csv << "," << a.mean << "," << a.lo << "," << a.hi << "," << p.params << "," << p.flops << ","
        << p.eval_examples_per_s << "," << p.latency_ms << ",\"" << p.mask << "\"\n";
  }
  core::write_file_atomic(r.run_dir + "/curves.csv", csv.str());
}

// curves.svg (and .png when it can be rendered): one line per criterion with its band.
void write_curve_plot(const CurveReport& r, std::vector<std::string>& files) {
  const std::string metric = r.task->primary_metric;
  core::LineChart chart;
  const int seeds = r.aggregates.empty() ? 1 : r.aggregates[0].seeds;
  chart.title = r.task->name + ": " + metric + " vs heads pruned (" +
                (seeds > 1 ? "mean of " + std::to_string(seeds) + " seeds, " : "") + "95% bootstrap band)";
  chart.x_label = "heads pruned (of " + std::to_string(r.total_heads) + ")";
  chart.y_label = "dev " + metric;
  for (const auto& a : r.aggregates) {
    if (chart.series.empty() || chart.series.back().name != a.criterion)
      chart.series.push_back({a.criterion, {}, {}, {}, {}});
    auto& s = chart.series.back();
    s.x.push_back(a.pruned), s.y.push_back(a.mean), s.lo.push_back(a.lo), s.hi.push_back(a.hi);
  }
  if (!chart.series.empty() && !chart.series[0].y.empty()) {
    chart.y_ref = chart.series[0].y[0] - 0.01;
    chart.y_ref_label = "unpruned - 1 point";
  }
  files.push_back("curves.svg");
  if (!core::write_svg_and_png(r.run_dir + "/curves.svg", core::svg_line_chart(chart)).empty()) files.push_back("curves.png");
}

// importance_<criterion>.svg/.png heatmaps, and the importance datasets of run.h5.
void write_importance(const CurveReport& r, std::vector<std::string>& files, core::TensorMap& h5) {
  for (const auto& [name, imp] : r.importance) {
    core::Heatmap m;
    m.title = name + " importance (layers x heads)";
    auto t = imp.to(torch::kFloat64).contiguous();
    m.values.assign(t.size(0), std::vector<double>(t.size(1)));
    for (int64_t l = 0; l < t.size(0); ++l)
      for (int64_t h = 0; h < t.size(1); ++h) m.values[l][h] = t[l][h].item<double>();
    const std::string svg = "importance_" + name + ".svg";
    files.push_back(svg);
    if (!core::write_svg_and_png(r.run_dir + "/" + svg, core::svg_heatmap(m)).empty())
      files.push_back("importance_" + name + ".png");
    h5[results::importance_key(name)] = imp.to(torch::kFloat32);
  }
}

// The masks and curve datasets of run.h5: per criterion and seed the masks [K, L, H], the metric and the
// heads pruned [K]; per criterion the mean and interval [K].
void add_curves(const CurveReport& r, core::TensorMap& h5) {
  const std::string metric = r.task->primary_metric;
  std::map<std::pair<std::string, int>, std::vector<torch::Tensor>> masks;
  std::map<std::pair<std::string, int>, std::vector<double>> values, pruned;
  const auto& imp = r.importance.begin()->second;
  for (const auto& p : r.points) {
    auto keep = core::parse_head_mask(p.mask, static_cast<int>(imp.size(0)), static_cast<int>(imp.size(1)));
    masks[{p.criterion, p.seed}].push_back(eval::head_mask_tensor(keep));
    values[{p.criterion, p.seed}].push_back(p.metrics.at(metric));
    pruned[{p.criterion, p.seed}].push_back(p.pruned);
  }
  for (const auto& [key, m] : masks) {
    const auto& [criterion, seed] = key;
    h5[results::masks_key(criterion, seed)] = torch::stack(m);
    h5[results::curve_series_key(criterion, seed, metric)] = torch::tensor(values[key], torch::kFloat64);
    h5[results::curve_series_key(criterion, seed, results::kHeadsPruned)] = torch::tensor(pruned[key], torch::kFloat64);
  }
  std::map<std::string, std::vector<double>> stats[3];  // mean, ci_lo, ci_hi per criterion
  for (const auto& a : r.aggregates)
    stats[0][a.criterion].push_back(a.mean), stats[1][a.criterion].push_back(a.lo),
        stats[2][a.criterion].push_back(a.hi);
  for (int i = 0; i < 3; ++i)
    for (const auto& [c, v] : stats[i])
      h5[results::curve_stat_key(c, results::kStats[i])] = torch::tensor(v, torch::kFloat64);
}

}  // namespace

std::vector<std::string> write_curve_report(const CurveReport& r) {
  std::vector<std::string> files;
  write_curves_csv(r);
  files.push_back("curves.csv");
  write_curve_plot(r, files);
  core::TensorMap h5;
  write_importance(r, files, h5);
  if (!r.importance.empty()) {
    add_curves(r, h5);
    core::write_hdf5(r.run_dir + "/run.h5", h5,
                     {{"config", r.config_yaml}, {"task", r.task->name}, {"metric", r.task->primary_metric}});
    files.push_back("run.h5");
  }
  return files;
}

}  // namespace hp::prune
