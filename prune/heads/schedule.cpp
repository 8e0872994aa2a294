// Schedules and rankings (see prune/heads/schedule.h).
#include "prune/heads/schedule.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/base/errors.h"

namespace hp::prune {

std::vector<int> schedule_counts(const std::vector<int>& points, const std::string& unit, int total_heads) {
  if (unit != "percent" && unit != "count")
    throw ConfigError("prune.schedule_unit = '" + unit + "'; use percent or count");
  if (points.empty()) throw ConfigError("prune.schedule is empty; give the points, e.g. [0, 10, 20, ..., 100]");
  const int limit = unit == "percent" ? 100 : total_heads;
  std::vector<int> counts;
  for (size_t i = 0; i < points.size(); ++i) {
    const int p = points[i];
    if (p < 0 || p > limit)
      throw ConfigError("prune.schedule[" + std::to_string(i) + "] = " + std::to_string(p) +
                        "; points must lie in 0.." + std::to_string(limit) +
                        (unit == "percent" ? " (percent)" : " (heads of the model)"));
    if (i > 0 && p < points[i - 1])
      throw ConfigError("prune.schedule is not monotonic: " + std::to_string(points[i - 1]) + " then " +
                        std::to_string(p) + "; list the points in increasing order");
    counts.push_back(unit == "percent" ? static_cast<int>(std::lround(p * total_heads / 100.0)) : p);
  }
  return counts;
}

core::HeadSet all_heads(const core::BertConfig& cfg) {
  core::HeadSet keep;
  for (int l = 0; l < cfg.num_hidden_layers; ++l) keep.emplace_back(cfg.heads_in_layer(l), true);
  return keep;
}

int max_prunable(const core::HeadSet& all, int min_heads_per_layer) {
  int n = 0;
  for (const auto& layer : all) n += std::max(0, static_cast<int>(layer.size()) - min_heads_per_layer);
  return n;
}

core::HeadSet prune_to(const Matrix& importance, const core::HeadSet& keep, int n_pruned, const RankOptions& opts) {
  core::HeadSet out = keep;
  int total = 0, pruned = 0;
  std::vector<int> present(keep.size(), 0);
  for (size_t l = 0; l < keep.size(); ++l) {
    total += static_cast<int>(keep[l].size());
    for (bool k : keep[l]) present[l] += k ? 1 : 0;
    pruned += static_cast<int>(keep[l].size()) - present[l];
  }
  if (n_pruned < pruned)
    throw InternalError("prune_to: cannot un-prune heads (" + std::to_string(pruned) + " > " +
                        std::to_string(n_pruned) + ")");
  // Candidates in pruning order: (within-layer rank if per_layer, importance, layer, head).
  std::vector<std::tuple<int, double, int, int>> order;
  for (size_t l = 0; l < keep.size(); ++l) {
    std::vector<std::pair<double, int>> layer;
    for (size_t h = 0; h < keep[l].size(); ++h)
      if (keep[l][h]) layer.push_back({importance.at(l).at(h), static_cast<int>(h)});
    std::stable_sort(layer.begin(), layer.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t r = 0; r < layer.size(); ++r)
      order.emplace_back(opts.per_layer ? static_cast<int>(r) : 0, layer[r].first, static_cast<int>(l),
                         layer[r].second);
  }
  std::stable_sort(order.begin(), order.end());
  for (const auto& [rank, imp, l, h] : order) {
    if (pruned >= n_pruned) break;
    if (present[l] <= opts.min_heads_per_layer) continue;
    out[l][h] = false;
    --present[l];
    ++pruned;
  }
  if (pruned < n_pruned)
    throw ConfigError("cannot prune " + std::to_string(n_pruned) + " of " + std::to_string(total) +
                      " heads with prune.min_heads_per_layer = " + std::to_string(opts.min_heads_per_layer) +
                      "; lower it or prune fewer heads");
  return out;
}

}  // namespace hp::prune
