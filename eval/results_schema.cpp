// Names of run.h5 datasets (see eval/results_schema.h).
#include "eval/results_schema.h"

#include <cstdlib>

#include "core/base/strings.h"

namespace hp::eval::results {

const std::vector<DatasetSpec>& run_h5_datasets() {
  static const std::vector<DatasetSpec> table = {
      {Dataset::kImportance, "importance/<criterion>", "[L, H] float32",
       "importance of each head, unpruned model, first seed"},
      {Dataset::kMasks, "masks/<criterion>/seed<k>", "[K, L, H]", "1 = head kept, at each curve point"},
      {Dataset::kCurveSeries, "curves/<criterion>/seed<k>/<metric | heads_pruned>", "[K] float64",
       "each point of one seed"},
      {Dataset::kCurveStat, "curves/<criterion>/<mean | ci_lo | ci_hi>", "[K] float64",
       "primary metric: mean over seeds, 95% bootstrap interval"},
      {Dataset::kGateLogAlpha, "gates/log_alpha", "[E, L, H]", "Hard-Concrete log α at each evaluation of a gated run"},
      {Dataset::kGatePOpen, "gates/p_open", "[E, L, H]", "probability that each gate is open, likewise"},
      {Dataset::kGateNeuronPOpen, "gates/neuron_p_open", "[E, L]",
       "a FLOPs or parameter target's FFN neuron gates: mean P(open) over each layer's, at each evaluation"},
      {Dataset::kGateMhaPOpen, "gates/mha_p_open", "[E, L]", "P(open) of each attention sublayer's coarse gate, likewise"},
      {Dataset::kGateFfnPOpen, "gates/ffn_p_open", "[E, L]", "P(open) of each FFN sublayer's coarse gate, likewise"},
      {Dataset::kGateLayerPOpen, "gates/layer_p_open", "[E, L]",
       "P(open) of each whole layer's gate (gates.layer_gates), likewise"},
      {Dataset::kGateHiddenPOpen, "gates/hidden_p_open", "[E, D]",
       "P(open) of each hidden channel's gate (gates.hidden_gates), likewise"},
  };
  return table;
}

std::string prefix(Dataset kind) {
  switch (kind) {
    case Dataset::kImportance: return "importance/";
    case Dataset::kMasks: return "masks/";
    case Dataset::kCurveSeries:
    case Dataset::kCurveStat: return "curves/";
    case Dataset::kGateLogAlpha: return "gates/log_alpha";
    case Dataset::kGatePOpen: return "gates/p_open";
    case Dataset::kGateNeuronPOpen: return "gates/neuron_p_open";
    case Dataset::kGateMhaPOpen: return "gates/mha_p_open";
    case Dataset::kGateFfnPOpen: return "gates/ffn_p_open";
    case Dataset::kGateLayerPOpen: return "gates/layer_p_open";
    case Dataset::kGateHiddenPOpen: return "gates/hidden_p_open";
  }
  return "";
}

std::string importance_key(const std::string& criterion) { return prefix(Dataset::kImportance) + criterion; }

std::string masks_key(const std::string& criterion, int seed) {
  return prefix(Dataset::kMasks) + criterion + "/seed" + std::to_string(seed);
}

std::string curve_series_key(const std::string& criterion, int seed, const std::string& series) {
  return prefix(Dataset::kCurveSeries) + criterion + "/seed" + std::to_string(seed) + "/" + series;
}

std::string curve_stat_key(const std::string& criterion, const std::string& stat) {
  return prefix(Dataset::kCurveStat) + criterion + "/" + stat;
}

namespace {

// "seed<k>" → k, or -1.
int seed_of(const std::string& part) {
  if (part.rfind("seed", 0) != 0 || part.size() == 4) return -1;
  char* end = nullptr;
  const long k = std::strtol(part.c_str() + 4, &end, 10);
  return *end == '\0' && k >= 0 ? static_cast<int>(k) : -1;
}

}  // namespace

std::optional<KeyParts> parse_key(const std::string& key) {
  const auto p = core::split(key, '/');
  for (Dataset d : kGateTrajectories)
    if (key == prefix(d)) return KeyParts{d, "", -1, ""};
  if (p.size() == 2 && p[0] == "importance" && !p[1].empty()) return KeyParts{Dataset::kImportance, p[1], -1, ""};
  if (p.size() == 3 && p[0] == "masks" && seed_of(p[2]) >= 0) return KeyParts{Dataset::kMasks, p[1], seed_of(p[2]), ""};
  if (p.size() == 4 && p[0] == "curves" && seed_of(p[2]) >= 0)
    return KeyParts{Dataset::kCurveSeries, p[1], seed_of(p[2]), p[3]};
  if (p.size() == 3 && p[0] == "curves")
    for (const char* stat : kStats)
      if (p[2] == stat) return KeyParts{Dataset::kCurveStat, p[1], -1, p[2]};
  return std::nullopt;
}

}  // namespace hp::eval::results
