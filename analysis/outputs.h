// Files of `prune analyze` (schema in the README, "prune analyze"): analysis.json (every statistic as an
// [L][H] array, null for absent heads), analysis.h5 (the same plus the head-distance matrix), roles.csv
// (one row per head) and the plots (heatmaps per statistic, the role map, the head map). All atomic.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "analysis/roles.h"

namespace hp::analysis {

// An [L][H] grid as JSON (NaN → null).
nlohmann::json grid_json(const Grid& g);
// The statistics, tests, roles, syntax, head map and no-op gradients of one analysis (the golden schema
// of tests/golden/make_analysis_goldens.py, plus "roles" and "summary").
nlohmann::json analysis_json(const Analysis& a);
// One-line summary, e.g. "72 heads; Holm: local 31, delimiter 12, ...".
std::string summary_line(const Analysis& a);

// roles.csv: layer, head, every statistic, every tested role's mean, p, Holm and BH p, and role flags.
std::string roles_csv(const Analysis& a);

// analysis.h5: stats/<key>, sieve/<role>/<field>, roles/<role>/<correction>, js, mds, noop/*; `extra`
// grids under their own names (compare/…, control/…). Attributes: settings and the example count.
void write_analysis_h5(const std::string& path, const Analysis& a, const std::map<std::string, Grid>& extra,
                       const std::string& settings_json);

// Heatmaps of every statistic and sieve mean, the role map and the head map (SVG, PNG when rsvg-convert
// exists). Returns the file names written.
std::vector<std::string> write_plots(const std::string& dir, const Analysis& a);

}  // namespace hp::analysis
