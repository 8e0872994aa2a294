// Which heads to prune: schedules (percent or count points) and rankings of an importance matrix.
// Torch-free: importances come as [L][H] doubles; masks are core::HeadSet (keep[l][h]).
#pragma once

#include <string>
#include <vector>

#include "core/model/bert_config.h"
#include "core/model/head_mask.h"  // HeadSet

namespace hp::prune {

using Matrix = std::vector<std::vector<double>>;  // [L][H]

// Heads pruned at each point: `points` in `unit` ("percent" of total_heads, rounded to the nearest
// head, or "count"). Must be non-decreasing within [0, total] (ConfigError naming prune.schedule).
std::vector<int> schedule_counts(const std::vector<int>& points, const std::string& unit, int total_heads);

struct RankOptions {
  bool per_layer = false;  // prune layer by layer in turn (each layer's least important first)
  int min_heads_per_layer = 0;  // never leave a layer with fewer heads
};

// Starting from `keep`, prunes present heads in ascending importance until `n_pruned` heads of the
// model are pruned in all (heads already pruned count). Ties go to the lower (layer, head). Throws
// ConfigError when min_heads_per_layer makes n_pruned unreachable.
core::HeadSet prune_to(const Matrix& importance, const core::HeadSet& keep, int n_pruned, const RankOptions& opts);

// Every head of a model present: keep[l] has the heads of layer l (a slimmed layer has fewer).
core::HeadSet all_heads(const core::BertConfig& cfg);

// The largest number of heads that can be pruned with `min_heads_per_layer`.
int max_prunable(const core::HeadSet& all, int min_heads_per_layer);

}  // namespace hp::prune
