// The config of a pruning run checked whole before any work (run_pruning's first step), for either objective:
// prune.* against the model's architecture, the frontier's models, the embedding run's own limits. Each failure is
// one ConfigError naming the key and the fix; nothing is written before it.
#pragma once

#include "core/base/config.h"
#include "core/model/bert_config.h"

namespace hp::prune {

// Range and name checks of prune.* against the model; ConfigError naming the key and the fix.
void validate_prune_config(const core::PruneConfig& p, const core::BertConfig& arch);

// Everything of `cfg` that can be checked before the data is read: validate_prune_config against model.path's
// encoder (a sentence-transformers folder's Transformer module for embeddings), and the objective's own checks.
void validate_run(const core::Config& cfg);

}  // namespace hp::prune
