// The report's panels for a pruning run of a sentence-embedding model (prune.objective: embedding): its
// summary.json says "objective": "embedding" and holds cosine Spearman and the mean cosine to the teacher in place of
// a classifier's metrics; --target-heads runs add the criteria's curves (summary.json's curves), --max-drop runs the
// frontier. (Their importances are read as a classifier run's are: analysis/report/report_panels.cpp.)
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace hp::analysis {

// True when `summary` (a summary.json) is an embedding run's.
bool is_embedding_summary(const nlohmann::json& summary);

// The summary panel's result table of an embedding run (`path`: its summary.json, for messages).
std::string embedding_summary(const std::string& path, const nlohmann::json& summary);

// The curves panel: the criteria's curves (cosine Spearman on the evaluation pairs against the heads pruned) and the
// frontier when the run has them; a note saying which command draws them otherwise.
std::string embedding_curves(const std::string& path, const nlohmann::json& summary);

}  // namespace hp::analysis
