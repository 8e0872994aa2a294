// The end of a pruning run for embeddings (prune/embedding/embedding_run.h): the variants scored, the choice
// exported as a sentence-transformers folder and checked, timed against the teacher, summary.json.
// Internal to the embedding run's files.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base/config.h"
#include "core/model/bert.h"
#include "prune/embedding/embedding_context.h"
#include "prune/stages/summary.h"

namespace hp::prune {

// "embedding stage N/5: what" in the log.
void log_step(int n, const std::string& what);

// Each of `models` (a step's name and model) scored (STATE/step-NAME.json, once) into steps[NAME] and logged; the
// name of the closest to the teacher on the selection sentences (what the model is pruned for, on held-out data; the
// Spearman of a few hundred pairs scatters by a point or two), a later one winning a tie.
std::string score_variants(const EmbedRun& r, const std::vector<std::pair<std::string, core::Bert>>& models,
                           const std::string& state, nlohmann::json& steps);

// RUN_DIR/model: the choice as a sentence-transformers folder, read back and checked to embed as `model` does.
nlohmann::json export_choice(const EmbedRun& r, const core::Bert& model);

// summary.json's opening for an embedding run, in the schema every run writes (prune/stages/summary.h): objective
// "embedding", metric cosine_spearman, the task, model and splits.
RunSummary embedding_summary(const EmbedRun& r);

// An embedding's scores (score) as a summary's metrics on the evaluation split, fractions as a task's are
// (cosine_spearman, cosine_pearson, mean_cosine_to_teacher), with the selection pairs' under select_.
std::map<std::string, double> summary_metrics(const nlohmann::json& scores);

// The teacher as the reference of `scores` (ReferenceSummary: in points; an embedding run has no control, its
// candidates are trained towards the teacher itself).
ReferenceSummary teacher_reference(const nlohmann::json& unpruned, const nlohmann::json& scores);

// `model` exported to RUN_DIR/model and checked, timed against the teacher at fp32 (prune/stages/stages.h
// time_against), `f` completed with both (and its parameters) into s.final, summary.json written.
void write_final(const EmbedRun& r, const core::Bert& model, FinalSummary f, RunSummary& s);

// A single model's end: `model` (the structure `keep`, `kept` of the encoder's FLOPs) exported to RUN_DIR/model and
// checked, timed against the teacher (prune/stages/stages.h time_against), `f` completed with both into s.final,
// summary.json written, one line on stdout naming `what`.
void finish_one(const EmbedRun& r, const core::Bert& model, const core::StructureMask& keep, double kept,
                FinalSummary f, RunSummary& s, const std::string& what);

}  // namespace hp::prune
