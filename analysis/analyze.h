// `prune analyze`: one command that says what every head of a BERT folder does over a whole data set
// (analysis/DEFINITIONS.md), optionally against a second model (--compare), a random-init control,
// bootstrap resamples and a pruning run (--prune-run). Writes analysis.json, analysis.h5, roles.csv and
// plots into analysis.out; each finished pass is kept in <out>/state so a killed run resumes.
// The stages below share an AnalyzeContext; cli/analyze_cmd.cpp runs them in order.
#pragma once

#include <torch/types.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "analysis/examples.h"
#include "analysis/roles.h"
#include "core/base/config.h"
#include "core/data/glue.h"
#include "core/io/checkpoint.h"
#include "core/model/bert.h"

namespace hp::analysis {

// A model of `like`'s shape with HF's initialisation (N(0, 0.02) weights, LayerNorm 1 and 0, zero
// biases), seeded: the random-init control.
core::Bert random_init_like(const core::Bert& like, uint64_t seed);

// What the stages of `prune analyze` share: stage 1 resolves the config, loads every model and reads the
// examples once; stage 2 adds the analysed model's findings; the later stages add to analysis.json and
// to the extra grids of analysis.h5.
struct AnalyzeContext {
  AnalyzeContext() = default;
  AnalyzeContext(const AnalyzeContext&) = delete;  // holds the models and every example
  AnalyzeContext& operator=(const AnalyzeContext&) = delete;

  // Stage 1, prepare: resolved once, read by every stage.
  const core::Config* cfg = nullptr;
  const core::TaskSpec* task = nullptr;
  std::string out;  // analysis.out resolved
  RoleSettings roles;  // analysis.tau, alpha, min_occurrences
  std::optional<core::Bert> model;  // model.path
  core::LoadReport report;
  torch::Tensor keep;  // analysis.mask as [L, Hmax]
  std::optional<core::Bert> other;  // analysis.compare, same shape
  core::LoadReport other_report;
  std::string slim_dir;  // <analysis.prune_run>/model
  std::optional<core::Bert> slim;  // the run's slimmed export, when it made one
  AnalysisInputs inputs;
  nlohmann::json settings;  // analysis.json's "settings"; its dump is part of every pass's fingerprint
  bool noop = false;  // Clark's no-op gradients for model.path
  std::string noop_note;  // why not, when not

  // Stage 2, the main pass, and what the later stages add to.
  PassResult main_pass;
  Analysis analysis;
  nlohmann::json json;  // analysis.json
  std::map<std::string, Grid> h5_extra;  // analysis.h5's extra grids: stability/, compare/, control/, prune_run/
};

// Stage 1. Loads model.path, analysis.compare and the slimmed export of analysis.prune_run before any
// work, so a shape mismatch fails at once and writes nothing; reads the examples and the token
// frequencies; settles the settings and whether the no-op gradients are computed.
void prepare_analyze(AnalyzeContext& ctx, const core::Config& cfg);

// Stage 2. The pass over model.path (resumed from <out>/state) and its analysis, the start of analysis.json.
void analyse_model(AnalyzeContext& ctx);

// Stage 3 (analysis.resamples > 0). Bootstrap stability of the roles (DEFINITIONS §9).
void bootstrap_stability(AnalyzeContext& ctx);

// Stage 4 (analysis.compare). The second model's pass and the per-head changes from the first.
void compare_models(AnalyzeContext& ctx);

// Stage 5 (analysis.control = random-init). The roles of a randomly initialised model of the same shape.
void random_init_control(AnalyzeContext& ctx);

// Stage 6 (analysis.prune_run). The run's importance against every statistic, the role make-up of the
// kept heads along its curves (DEFINITIONS §8), and its slimmed export against the analysed model.
void relate_prune_run(AnalyzeContext& ctx);

// Stage 7. analysis.json, analysis.h5, roles.csv and the plots into analysis.out.
void write_analysis(const AnalyzeContext& ctx);

}  // namespace hp::analysis
