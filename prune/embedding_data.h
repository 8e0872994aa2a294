// The sentences the pruning run for embeddings distils on (#59, prune/embedding_run.h): unlabelled single sentences
// from training splits only — data.task's (less the selection slice) and those of prune.distill_tasks. Torch-free.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/data/glue.h"

namespace hp::prune {

// Both sentences of every pair (or the one of a single-sentence row), each once, in the file's order.
std::vector<core::Example> single_sentences(const std::vector<core::Example>& rows);

// ConfigError naming prune.distill_tasks for an unknown task, a task without a train split, `task` itself (its
// sentences are always in) or a task named twice.
void check_distill_tasks(const std::vector<std::string>& extra, const std::string& task);

// The sentences of `own` (data.task's training rows, the selection held out) followed, for each task of `extra`, by
// its train split's sentences that are neither in `own` nor in `exclude` (the selection and evaluation pairs'
// sentences), at most own's count: the first of a seeded shuffle, kept in file order. `what` gets one clause per
// task for the log ("sst2 +9,513 of 66,978").
std::vector<core::Example> distill_sentences(const std::vector<core::Example>& own, const std::vector<std::string>& extra,
                                             const std::string& root, const std::set<std::string>& exclude, int seed,
                                             std::string* what);

}  // namespace hp::prune
