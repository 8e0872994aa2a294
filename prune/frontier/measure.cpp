// The frontier, written once for every objective (see prune/frontier/measure.h).
#include "prune/frontier/measure.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/dist/distributed.h"
#include "core/plot/plot.h"
#include "eval/evaluator.h"
#include "prune/frontier/frontier_timing.h"

namespace hp::prune {

namespace fs = std::filesystem;

namespace {

// fp32 is among prune.frontier_precisions (otherwise only the unpruned model is measured at fp32, as the baseline).
bool fp32_asked(const core::PruneConfig& P) {
  return std::count(P.frontier_precisions.begin(), P.frontier_precisions.end(), "fp32") > 0;
}

// One structure at one precision: the objective's scores and the speedups at every timing.
FrontierPoint measure(const FrontierMeasure& m, const core::Bert& slim, FrontierPoint p, core::Precision precision) {
  core::Bert model = slim;
  model.set_precision(precision);
  eval::calibrate_int8(model, *m.cfg, *m.tokenizer);  // int8 only
  p.precision = core::precision_name(precision);
  const std::string& metric = m.objective->task().primary_metric;
  p.metric = 100 * m.objective->evaluate(model, Split::kEval).metrics.at(metric);
  eval::EvalResult on_slice = m.objective->evaluate(model, Split::kSelect);
  p.select_metric = 100 * on_slice.metrics.at(metric), p.select_predictions = std::move(on_slice.predictions);
  const std::string what = frontier_label(p);
  for (const auto& [batch, seq] : m.timings)
    p.speedups[timing_key(batch, seq)] = speedup_against(*m.base, model, batch, seq, what, m.cfg->prune.frontier_time);
  p.speedup = p.speedups.at(timing_key(m.timings.front().first, m.timings.front().second));
  return p;
}

}  // namespace

bool measure_all(const FrontierMeasure& m, const std::vector<Candidate>& cands, Frontier& f) {
  if (cands.empty()) return true;
  const auto precisions = native_precisions(m.cfg->prune);
  // fp32 only as the baseline where prune.frontier_precisions leaves it out (not read back either); the control, a
  // reference, at fp32 alone.
  auto wanted = [&](const Candidate& c, core::Precision precision) {
    if (c.point.method == PointMethod::kControl) return precision == core::Precision::kFp32;
    return precision != core::Precision::kFp32 || c.point.method == PointMethod::kUnpruned || fp32_asked(m.cfg->prune);
  };
  auto file_of = [&](const Candidate& c, core::Precision precision) {
    return m.dir + "/" + c.key + "-" + core::precision_name(precision) + ".json";
  };
  long total = 0, stored = 0;  // those measured before a resume count as done, outside the rate
  std::map<std::string, FrontierPoint> kept;  // the stored measurements a resumed run reuses
  for (const auto& c : cands)
    for (const auto precision : precisions) {
      if (!wanted(c, precision)) continue;
      ++total;
      if (const std::string file = file_of(c, precision); fs::exists(file))
        if (auto p = read_point(file)) kept[file] = *p, ++stored;
    }
  core::Progress progress("frontier", total, "candidates", stored);
  long done = stored;
  for (const auto& c : cands) {
    std::optional<core::Bert> slim;  // built once for its precisions, when one is missing
    for (const auto precision : precisions) {
      if (!wanted(c, precision)) continue;
      const std::string file = file_of(c, precision);
      if (kept.count(file)) {
        add_measured(f, kept.at(file));  // the unpruned fp32 model sets f.baseline
        continue;
      }
      if (core::dist::stop_requested(m.stop)) return false;
      if (!slim) slim = c.build();
      const FrontierPoint p = measure(m, *slim, c.point, precision);
      fs::create_directories(m.dir);
      write_point(file, p);
      add_measured(f, p);
      std::ostringstream line;
      line << frontier_label(p) << ": " << p.metric << ", x" << p.speedup;
      progress.update(++done, line.str());
    }
  }
  if (done > stored) progress.finish();  // a pass that only read stored measurements has nothing to report
  return true;
}

namespace {

// frontier.csv and the two charts in run.out_dir; their names appended to `files`.
void write_frontier_files(const core::Config& cfg, const Frontier& f, std::vector<std::string>& files) {
  core::write_file_atomic(cfg.run.out_dir + "/frontier.csv", frontier_csv(f));
  files.push_back("frontier.csv");
  for (const auto& [name, chart] :
       {std::pair{"frontier", frontier_chart(f)}, {"frontier_cost", frontier_cost_chart(f)}}) {
    files.push_back(std::string(name) + ".svg");
    if (!core::write_svg_and_png(cfg.run.out_dir + "/" + name + ".svg", core::svg_line_chart(chart)).empty())
      files.push_back(std::string(name) + ".png");
  }
}

}  // namespace

std::optional<Frontier> run_frontier(const FrontierMeasure& m, const std::vector<Candidate>& cands, Frontier f,
                                     std::vector<std::string>& files) {
  if (!measure_all(m, cands, f)) return std::nullopt;
  if (m.ort) m.ort(f);
  // The difference on the slice with its interval (prune.bootstrap resamples, the same for every candidate).
  const Objective& o = *m.objective;
  add_select_deltas(
      f, [&o](const std::vector<float>& p, const std::vector<float>& g) { return o.metric_of(p, g); },
      o.gold(Split::kSelect), m.cfg->prune.bootstrap, static_cast<unsigned long long>(m.cfg->run.seed));
  const auto chosen = choose(f);
  f.chosen = chosen ? static_cast<int>(*chosen) : -1;
  write_frontier_files(*m.cfg, f, files);
  return f;
}

const Candidate& candidate_of(const std::vector<Candidate>& cands, const FrontierPoint& p) {
  const auto it = std::find_if(cands.begin(), cands.end(), [&](const Candidate& c) {
    return c.point.method == p.method && c.point.step == p.step && c.point.criterion == p.criterion;
  });
  HP_CHECK(it != cands.end(), "frontier: the chosen point " + frontier_label(p) + " has no candidate");
  return *it;
}

}  // namespace hp::prune
