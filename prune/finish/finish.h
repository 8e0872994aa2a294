// The end every pruning run shares, for every objective: stages 5-8 from a choice (N heads by a criterion or the
// gates, a budget's search or gates, the frontier's candidate) and stage 9, summary.json, the model card and the
// result line (prune/run/pipeline.h numbers the stages).
#pragma once

#include <optional>

#include "core/base/config.h"
#include "prune/record/frontier.h"
#include "prune/search/mask_search.h"
#include "prune/stages/stages.h"

namespace hp::prune {

// summary.json's opening (prune/stages/summary.h): the objective, task, models, metric and splits of ctx's run.
RunSummary run_summary(const RunContext& ctx);

// Stages 5-8 with prune.target_heads = N or a budget (`grads`, the mask gradients of a budget's search): the final
// model, its checks and speed. Empty when stopped. After the frontier (`frontier` set) its chosen candidate as
// measured: no search, training or recovery again.
std::optional<FinalSummary> final_model(RunContext& ctx, CurvesSummary& curves, FinalModels& models,
                                        const MaskGradients* grads, const Frontier* frontier);

// Stage 5 with prune.max_drop, after the frontier `f` was measured: `f` into the summary and its choice as the config
// stages 5-8 then run under (`chosen`, which ctx points at from here on). When no candidate is within D, the summary
// is written with the frontier and a ConfigError says which came closest: nothing is exported.
void adopt_frontier_choice(RunContext& ctx, RunSummary& s, const Frontier& f, std::optional<core::Config>& chosen);

// Stage 9: summary.json (and the exported model's card), and the one result line on stdout.
void write_summary(const RunContext& ctx, RunSummary& s, const FinalModels* models);

}  // namespace hp::prune
