// `prune analyze`: one command that says what every head of a BERT folder does over a whole data set
// (analysis/DEFINITIONS.md), optionally against a second model (--compare), a random-init control,
// bootstrap resamples and a pruning run (--prune-run). Writes analysis.json, analysis.h5, roles.csv and
// plots into analysis.out; each finished pass is kept in <out>/state so a killed run resumes.
#pragma once

#include <map>
#include <string>

#include "core/base/config.h"

namespace hp::core {
class Bert;
}

namespace hp::analysis {

int run_analyze(const core::Config& cfg);

// A model of `like`'s shape with HF's initialisation (N(0, 0.02) weights, LayerNorm 1 and 0, zero
// biases), seeded: the random-init control.
core::Bert random_init_like(const core::Bert& like, uint64_t seed);

}  // namespace hp::analysis
