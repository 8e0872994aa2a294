// The selection slice: the rows on which the pruning run makes its choices — the best checkpoint of
// fine-tuning, recovery and gates (train.eval_split of those runs), the best of a budget candidate's steps and the
// frontier's choice within prune.max_drop — kept apart from the split the run reports (prune.eval_split), so that
// "within 1 point" is not optimistic by construction. By default the last prune.select_examples whole rows (at most a
// tenth) of train.train_split in file order, held out of training and of ranking with every row that shares their text
// (core/data/holdout.h: SST-2's phrases are parts of its sentences); prune.select_split names another split instead.
// Torch-free.
#pragma once

#include <string>

#include "core/base/config.h"
#include "core/data/glue.h"

namespace hp::prune {

struct Selection {
  core::Config cfg;  // train.train_split (and prune.rank_split when it was the same) without the held-out rows,
                     // train.eval_split = the selection
  std::string split;  // the selection's split spec, e.g. "train[holdout:1000]"
  std::string what;   // one line for the log: where choices are made, and why there
};

// ConfigError unless the split `spec` names (its slice aside) is one of the task's (`key` names the config key).
void check_split(const core::TaskSpec& task, const std::string& key, const std::string& spec);

// `cfg` with its choices moved off the evaluation split. Reads train.train_split under `root` to count its rows.
// ConfigError naming the key: prune.select_split equal to prune.eval_split or a part of it, without labels (or
// rows), or not a split of the task,
// prune.select_examples negative, a training split too small to hold a tenth out. A training split the task does
// not have is left alone (a run that trains then fails naming it, as before).
Selection resolve_selection(const core::Config& cfg, const core::TaskSpec& task, const std::string& root);

}  // namespace hp::prune
