// The unlabelled rows a pruning run distils on besides its labels, from training splits only (prune.distill_tasks):
// for embeddings (prune/embedding/embedding_run.h) single sentences, data.task's (less the selection slice) and those of
// the other tasks; for a task's distillation the other tasks' rows, which a distilled step adds for the
// teacher alone to label (train/augment.h with_unlabelled_rows). Torch-free.
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
// sentences) nor repeated, at most own's count: the first of a seeded shuffle, kept in file order. Texts are compared
// on their letters and digits, lower-cased, as in distill_rows: MRPC holds 245 STS-B dev sentences tokenised
// otherwise. `what` gets one clause per task for the log ("sst2 +9,513 of 66,978").
std::vector<core::Example> distill_sentences(const std::vector<core::Example>& own, const std::vector<std::string>& extra,
                                             const std::string& root, const std::set<std::string>& exclude, int seed,
                                             std::string* what);

// prune.distill_tasks' training rows for `task`'s distillation: each task's train split with its labels dropped, for
// a one-text `task` a pair task's sentences one by one; every row sharing a text with a split of `task` left out
// (train, dev, test: the teacher labels no text the run trains, chooses or reports on, nor the test's), and
// repeats. Texts are compared on their letters and digits, lower-cased: STS-B holds 63 MRPC dev sentences, most of
// them tokenised otherwise. ConfigError naming the key for a one-text task given to a pair `task`. `what` gets
// one clause per task for the log ("stsb +4893 of 5749").
std::vector<core::Example> distill_rows(const core::TaskSpec& task, const std::vector<std::string>& extra,
                                        const std::string& root, std::string* what);

}  // namespace hp::prune
