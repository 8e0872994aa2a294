// How the frontiers (prune/frontier/frontier_stage.h for classifiers, prune/embedding/embedding_run.h for embeddings) measure a
// candidate's speed: the precisions this CPU runs natively, and the speedup over the unpruned fp32 model in
// alternating rounds.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/base/config.h"
#include "core/model/bert.h"
#include "prune/record/frontier.h"
#include "prune/export/onnx.h"

namespace hp::prune {

// prune.frontier_precisions that this CPU runs natively, fp32 first (always: it is the baseline's).
std::vector<core::Precision> native_precisions(const core::PruneConfig& P);

// The name of a timing in FrontierPoint::speedups and frontier.csv: "b32_128".
std::string timing_key(long batch, long seq);

// Unpruned fp32 time over the candidate's at batch x seq (synthetic tokens): the median over 3 alternating rounds
// (each model's median time in the round, measured for `seconds`) of the round's ratio, so that a passing slowdown
// of the machine lands on one round, not on one model. A spread of more than x2 between the rounds' ratios means
// the machine was busy: said once, naming `what`.
double speedup_against(const core::Bert& base, const core::Bert& model, long batch, long seq, const std::string& what,
                       double seconds);

// ONNX Runtime's reference points appended to f: `run` makes them (ort_reference on the unpruned model; nullopt
// with the reason in `skipped`, which f.onnxruntime then says, warned once), `metric` scores each one's outputs in
// points. Their speedups are over the unpruned fp32 `base` timed just before and after ONNX Runtime (the mean of
// both: ONNX Runtime runs in another process, so rounds cannot alternate), that time kept in DIR/headprune.json so a
// resumed run draws the same points.
void add_ort_rows(const core::Bert& base, long batch, long seq, double seconds, int heads, const std::string& dir,
                  const std::function<std::optional<OrtReference>(std::string* skipped)>& run,
                  const std::function<double(const torch::Tensor&)>& metric, Frontier& f);

}  // namespace hp::prune
