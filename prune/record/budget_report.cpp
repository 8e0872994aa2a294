// The budget curves' CSV and charts (see prune/record/budget_report.h).
#include "prune/record/budget_report.h"

#include <sstream>

namespace hp::prune {

namespace {

std::string y_label(const BudgetCurves& c) { return c.metric + " (" + c.split + ")"; }

}  // namespace

std::string budget_csv(const BudgetCurves& c) {
  std::ostringstream csv;
  csv << "method,kept_fraction,heads_kept,params,flops,mean,ci_lo,ci_hi,latency_ms\n";
  for (const auto& p : c.points)
    csv << p.method << "," << p.kept_fraction << "," << p.heads_kept << "," << p.params << "," << p.flops << ","
        << p.mean << "," << p.ci_lo << "," << p.ci_hi << "," << p.latency_ms << "\n";
  return csv.str();
}

core::LineChart budget_chart(const BudgetCurves& c) {
  core::LineChart chart;
  chart.title = c.task + ": " + c.metric + " against " + c.unit + " kept";
  chart.x_label = c.unit == "latency" ? "measured latency kept (%, batch " + std::to_string(c.latency_batch) + " x " +
                                            std::to_string(c.latency_seq) + " tokens)"
                                      : "encoder " + c.unit + " kept (%)";
  chart.y_label = y_label(c);
  for (const auto& p : c.points) {
    core::Series& s = chart.series_named(p.method);
    s.x.push_back(100 * p.kept_fraction), s.y.push_back(p.mean), s.lo.push_back(p.ci_lo), s.hi.push_back(p.ci_hi);
  }
  return chart;
}

std::optional<core::LineChart> pareto_chart(const BudgetCurves& c) {
  if (c.unpruned_latency_ms <= 0) return std::nullopt;
  core::LineChart chart;
  chart.title = c.task + ": " + c.metric + " against measured speedup (batch " + std::to_string(c.latency_batch) + ")";
  chart.x_label = "speedup over the unpruned model (x)";
  chart.y_label = y_label(c);
  for (const auto& p : c.points) {
    if (p.latency_ms <= 0) continue;
    core::Series& s = chart.series_named(p.method);
    s.x.push_back(c.unpruned_latency_ms / p.latency_ms), s.y.push_back(p.mean);
  }
  return chart;
}

}  // namespace hp::prune
