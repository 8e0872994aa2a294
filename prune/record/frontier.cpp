// The frontier's Pareto front and choice (see prune/record/frontier.h).
#include "prune/record/frontier.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>
#include <sstream>

#include "core/base/errors.h"
#include "core/base/files.h"  // read_file, write_file_atomic
#include "core/base/strings.h"  // format_number
#include "eval/metrics.h"

namespace hp::prune {

namespace {

// a dominates b: at least as fast and as accurate, strictly better in one.
bool dominates(const FrontierPoint& a, const FrontierPoint& b) {
  return a.speedup >= b.speedup && a.metric >= b.metric && (a.speedup > b.speedup || a.metric > b.metric);
}

bool same_place(const FrontierPoint& a, const FrontierPoint& b) {
  return a.speedup == b.speedup && a.metric == b.metric;
}

// Metrics are ratios of counts scaled to points: 91.2 − 1 and 90.2 may differ in the last bit.
constexpr double kSlack = 1e-9;

// A candidate whose selection metric is defined and at most max_drop below the baseline's.
bool within_drop(const FrontierPoint& p, double select_baseline, double max_drop) {
  return !p.reference && std::isfinite(p.select_metric) && p.select_metric >= select_baseline - max_drop - kSlack;
}

const std::vector<std::pair<PointMethod, std::string>>& method_names() {
  static const std::vector<std::pair<PointMethod, std::string>> names = {
      {PointMethod::kUnpruned, "unpruned"}, {PointMethod::kHeads, "heads"}, {PointMethod::kKwon, "kwon"},
      {PointMethod::kGates, "gates"},       {PointMethod::kModel, "model"}, {PointMethod::kOnnxRuntime, "onnxruntime"},
      {PointMethod::kControl, "control"}};
  return names;
}

}  // namespace

const std::string& point_method_name(PointMethod m) {
  for (const auto& [method, name] : method_names())
    if (method == m) return name;
  HP_CHECK(false, "point_method_name: a PointMethod without a name");
  return method_names().front().second;
}

void to_json(nlohmann::json& j, PointMethod m) { j = point_method_name(m); }

PointMethod parse_point_method(const std::string& s) {
  std::string known;
  for (const auto& [method, name] : method_names()) {
    if (name == s) return method;
    known += (known.empty() ? "" : ", ") + name;
  }
  throw InputError("a frontier point's method '" + s + "' is none of " + known);
}

void from_json(const nlohmann::json& j, PointMethod& m) { m = parse_point_method(j.get<std::string>()); }

namespace {

// The unpruned fp32 model or the control at fp32: the two the reference is taken from.
bool reference_candidate(const FrontierPoint& p) {
  return (p.method == PointMethod::kUnpruned || p.method == PointMethod::kControl) && p.precision == "fp32";
}

}  // namespace

void add_measured(Frontier& f, FrontierPoint p) {
  // The unpruned fp32 model is the speedups' denominator too; quantised, it (and the control) is a candidate.
  if (reference_candidate(p)) p.reference = true;
  if (p.method == PointMethod::kUnpruned && p.precision == "fp32")
    f.unpruned_metric = p.metric, f.unpruned_select = p.select_metric;
  f.points.push_back(std::move(p));
  // The reference: the better of the two on the slice, the unpruned model on a tie.
  const FrontierPoint* best = nullptr;
  for (const auto& q : f.points)
    if (reference_candidate(q) && (!best || q.select_metric > best->select_metric)) best = &q;
  if (best) {
    f.baseline = best->metric, f.select_baseline = best->select_metric;
    f.reference = point_method_name(best->method);
  }
}

std::string reference_words(const Frontier& f) {
  return f.reference == "control" ? "the control's (the unpruned model trained as long as the candidates)"
                                  : "the unpruned fp32 model's";
}

std::string reference_summary(const Frontier& f, bool select) {
  const FrontierPoint* control = nullptr;
  for (const auto& p : f.points)
    if (p.method == PointMethod::kControl && p.precision == "fp32") control = &p;
  std::ostringstream unpruned, other;
  unpruned << "unpruned fp32 " << (select ? f.unpruned_select : f.unpruned_metric);
  if (control) other << "control " << (select ? control->select_metric : control->metric);
  if (!control) return unpruned.str();
  return f.reference == "control" ? other.str() + ", " + unpruned.str() : unpruned.str() + ", " + other.str();
}

const FrontierPoint* reference_point(const Frontier& f) {
  for (const auto& p : f.points)
    if (reference_candidate(p) && point_method_name(p.method) == f.reference) return &p;
  return nullptr;
}

std::string frontier_label(const FrontierPoint& p) {
  std::string s = point_method_name(p.method);
  for (const auto* part : {&p.criterion, &p.budget, &p.precision})
    if (!part->empty()) s += " " + *part;
  return s;
}

std::vector<std::size_t> pareto_front(const std::vector<FrontierPoint>& points) {
  std::vector<std::size_t> front;
  for (std::size_t i = 0; i < points.size(); ++i) {
    bool kept = std::isfinite(points[i].metric) && std::isfinite(points[i].speedup);
    for (std::size_t j = 0; j < points.size() && kept; ++j)
      kept = !(dominates(points[j], points[i]) || (j < i && same_place(points[j], points[i])));
    if (kept) front.push_back(i);
  }
  std::stable_sort(front.begin(), front.end(),
                   [&](std::size_t a, std::size_t b) { return points[a].speedup < points[b].speedup; });
  return front;
}

std::optional<std::size_t> choose_within(const std::vector<FrontierPoint>& points, double select_baseline,
                                         double max_drop) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const FrontierPoint& p = points[i];
    if (!within_drop(p, select_baseline, max_drop) || !(p.speedup > 1)) continue;
    if (!best || p.speedup > points[*best].speedup ||
        (p.speedup == points[*best].speedup && p.select_metric > points[*best].select_metric))
      best = i;
  }
  return best;
}

std::optional<std::size_t> choose(const Frontier& f) { return choose_within(f.points, f.select_baseline, f.max_drop); }

std::string no_choice_message(const Frontier& f, const std::string& metric, const std::string& folder) {
  const FrontierPoint* closest = nullptr;  // the most accurate candidate that is not the unpruned fp32 model
  const FrontierPoint* fastest = nullptr;  // the fastest within D (none of them beats the unpruned fp32 model)
  for (const auto& p : f.points) {
    if (p.reference || !std::isfinite(p.select_metric)) continue;
    if (!closest || p.select_metric > closest->select_metric) closest = &p;
    if (within_drop(p, f.select_baseline, f.max_drop) && (!fastest || p.speedup > fastest->speedup)) fastest = &p;
  }
  std::ostringstream msg;
  msg << "prune.max_drop = " << f.max_drop << ": ";
  if (fastest) {
    msg << "no candidate within " << f.max_drop << " point(s) of " << reference_words(f) << " " << metric << " "
        << f.select_baseline << " on the selection slice " << f.select_split
        << " runs faster than that model (the fastest of them: " << frontier_label(*fastest) << " at x"
        << fastest->speedup << "), so the model as it is is the fastest within D; raise --max-drop to trade "
        << metric << " for speed; ";
  } else {
    msg << "no candidate is within " << f.max_drop << " point(s) of " << reference_words(f) << " " << metric << " "
        << f.select_baseline << " on the selection slice " << f.select_split;
    if (closest) msg << " (the closest: " << frontier_label(*closest) << " at " << closest->select_metric << ")";
    msg << "; raise --max-drop, or recover longer (prune.recover_steps); ";
  }
  msg << folder << "/frontier.csv lists every candidate, and nothing was exported";
  return msg.str();
}

std::string unresolved_choice(const FrontierPoint& p, const Frontier& f) {
  const double width = p.select_hi - p.select_lo;
  if (!std::isfinite(width) || width <= 2 * f.max_drop + kSlack) return "";
  const auto num = [](double v) { return core::format_number("%+.2f", v); };
  return "the selection slice " + f.select_split + " cannot resolve " + core::format_number("%g", f.max_drop) +
         " point(s): the chosen candidate's 90% interval there is " + num(p.select_lo) + " to " + num(p.select_hi) +
         " (" + core::format_number("%.2f", width) + " points wide), so on other data it may land more than " +
         core::format_number("%g", f.max_drop) +
         " below the unpruned model; more held-out rows "
         "(prune.select_examples, at most a tenth of the training split) or a larger --max-drop narrow that";
}

std::vector<double> frontier_gate_budgets(const std::vector<std::string>& setting, const Frontier& f) {
  std::set<double> out;
  if (setting.size() == 1 && setting[0] == "auto") {
    for (const auto& p : f.points)
      if (p.method == PointMethod::kKwon && p.precision == "fp32" && within_drop(p, f.select_baseline, 2 * f.max_drop))
        out.insert(p.flops_kept);
    // One training run, where the gates can move the front most: the deepest cut the search left near the line.
    if (out.empty()) return {};
    return {*out.begin()};
  }
  for (const auto& s : setting) {
    char* end = nullptr;
    const double pct = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !(pct > 0 && pct < 100))
      throw ConfigError("prune.frontier_gates has '" + s + "'; use FLOPs percents in (0, 100), e.g. [30, 50], or "
                        "[auto] (alone), or [] for no gates");
    out.insert(pct / 100);
  }
  return {out.begin(), out.end()};
}

std::optional<int> refine_budget(const Frontier& f, int min_gap) {
  std::map<int, bool> within;  // budget percent → some precision of its search candidate is within D on the slice
  for (const auto& p : f.points) {
    if (p.method != PointMethod::kKwon) continue;
    within[static_cast<int>(std::lround(100 * p.flops_kept))] |= within_drop(p, f.select_baseline, f.max_drop);
  }
  const auto deepest = std::find_if(within.begin(), within.end(), [](const auto& b) { return b.second; });
  if (deepest == within.end() || deepest == within.begin()) return std::nullopt;
  const int hi = deepest->first, lo = std::prev(deepest)->first;
  if (hi - lo <= std::max(min_gap, 1)) return std::nullopt;
  return (hi + lo + 1) / 2;
}

void write_point(const std::string& file, const FrontierPoint& p) {
  nlohmann::json j = p;
  j["select_predictions"] = p.select_predictions;
  core::write_file_atomic(file, j.dump(2) + "\n");
}

std::optional<FrontierPoint> read_point(const std::string& file) {
  try {
    const auto j = nlohmann::json::parse(core::read_file(file));
    if (!j.contains("select_metric")) return std::nullopt;
    auto p = j.get<FrontierPoint>();
    if (j.contains("select_predictions")) p.select_predictions = j.at("select_predictions").get<std::vector<float>>();
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(file + ": not a frontier measurement (" + e.what() + "); delete it and rerun to measure again");
  }
}

void add_select_deltas(Frontier& f, const eval::RowMetric& metric, const std::vector<float>& gold, int resamples,
                       unsigned long long seed) {
  const FrontierPoint* ref = reference_point(f);
  const std::vector<float>* base = ref ? &ref->select_predictions : nullptr;
  for (auto& p : f.points) {
    if (p.method == PointMethod::kOnnxRuntime) continue;
    p.select_delta = p.select_lo = p.select_hi = p.select_metric - f.select_baseline;
    if (!base || base->size() != gold.size() || p.select_predictions.size() != gold.size() || gold.empty()) continue;
    const auto d = eval::paired_bootstrap(metric, p.select_predictions, *base, gold, resamples, 0.9, seed);
    p.select_lo = 100 * d.lo, p.select_hi = 100 * d.hi;
  }
}

std::string frontier_csv(const Frontier& f) {
  std::set<std::string> timings;
  for (const auto& p : f.points)
    for (const auto& [name, v] : p.speedups) timings.insert(name);
  const auto front = pareto_front(f.points);
  std::ostringstream csv;
  csv << "method,criterion,budget,precision,heads_kept,flops_kept,metric,speedup";
  for (const auto& t : timings) csv << ",speedup_" << t;
  csv << ",select_metric,variant,cost_s,select_delta_lo,select_delta_hi,reference,pareto,chosen\n";
  for (std::size_t i = 0; i < f.points.size(); ++i) {
    const FrontierPoint& p = f.points[i];
    csv << point_method_name(p.method) << "," << p.criterion << "," << p.budget << "," << p.precision << ","
        << p.heads_kept << "," << p.flops_kept << "," << p.metric << "," << p.speedup;
    for (const auto& t : timings) {
      csv << ",";
      if (const auto it = p.speedups.find(t); it != p.speedups.end()) csv << it->second;
    }
    const bool on_front = std::find(front.begin(), front.end(), i) != front.end();
    csv << ",";
    if (p.method != PointMethod::kOnnxRuntime) csv << p.select_metric;  // ONNX Runtime is not run on the selection slice
    csv << "," << p.variant << "," << p.cost_s << ",";
    if (p.method != PointMethod::kOnnxRuntime) csv << p.select_lo << "," << p.select_hi;
    else csv << ",";
    csv << "," << p.reference << "," << on_front << "," << (static_cast<int>(i) == f.chosen) << "\n";
  }
  return csv.str();
}

core::LineChart frontier_chart(const Frontier& f) {
  core::LineChart chart;
  chart.title = f.task + ": " + f.metric + " against measured speedup (" + f.timing + ")";
  chart.x_label = "speedup over the unpruned fp32 model (x, log scale)";
  chart.y_label = f.metric + " (" + f.split + ")";
  chart.log_x = true;
  chart.y_ref = f.baseline - f.max_drop;
  std::ostringstream drop;
  drop << (f.reference == "control" ? "control" : "unpruned fp32") << " - " << f.max_drop << " point" << (f.max_drop == 1 ? "" : "s");
  chart.y_ref_label = drop.str();
  core::Series front{"Pareto front", {}, {}, {}, {}, false, "black", false};
  for (std::size_t i : pareto_front(f.points))
    front.x.push_back(f.points[i].speedup), front.y.push_back(f.points[i].metric);
  chart.series.push_back(front);
  for (const auto& p : f.points) {
    const std::string& method = point_method_name(p.method);
    const std::string name = p.method == PointMethod::kOnnxRuntime ? "ONNX Runtime " + p.precision
                             : p.criterion.empty()                 ? method + " " + p.precision
                                                                   : method + " " + p.criterion + " " + p.precision;
    core::Series& s = chart.series_named(name, true);
    s.x.push_back(p.speedup), s.y.push_back(p.metric);
  }
  if (f.chosen >= 0) {
    const FrontierPoint& c = f.points.at(static_cast<std::size_t>(f.chosen));
    chart.series.push_back({"chosen", {c.speedup}, {c.metric}, {}, {}, true, "black", true});
  }
  return chart;
}

core::LineChart frontier_cost_chart(const Frontier& f) {
  core::LineChart chart;
  chart.title = f.task + ": what each candidate cost to make, against its " + f.metric;
  chart.x_label = "seconds of search and training (log scale; the unpruned and head candidates cost none)";
  chart.y_label = f.metric + " (" + f.split + ")";
  chart.log_x = true;
  for (const auto& p : f.points) {
    if (p.reference || p.precision != "fp32" || !(p.cost_s > 0)) continue;
    const std::string& method = point_method_name(p.method);
    core::Series& s = chart.series_named(method, true);
    s.x.push_back(p.cost_s), s.y.push_back(p.metric);
  }
  if (f.chosen >= 0) {
    const FrontierPoint& c = f.points.at(static_cast<std::size_t>(f.chosen));
    if (c.cost_s > 0) chart.series.push_back({"chosen", {c.cost_s}, {c.metric}, {}, {}, true, "black", true});
  }
  return chart;
}

}  // namespace hp::prune
