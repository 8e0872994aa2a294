// The two figures of `prune analyze` that are not plain heatmaps (those come from core/plot/plot.h): the role
// map (each head's roles after Holm as letters in a layers × heads grid) and the head map (Clark's MDS of
// the Jensen–Shannon divergences, one dot per head coloured by layer). Standalone SVG, torch-free.
#pragma once

#include <string>

#include "analysis/roles.h"

namespace hp::analysis {

std::string svg_role_map(const Analysis& a);
std::string svg_head_map(const Analysis& a);

}  // namespace hp::analysis
