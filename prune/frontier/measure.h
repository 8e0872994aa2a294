// The frontier of `--max-drop D`, written once for every objective: its candidates measured at every native
// precision (the objective, prune/objective/objective.h, scores them, the unpruned fp32 model times them), ONNX
// Runtime's reference rows, each point's difference on the selection slice with its interval, the fastest within D
// chosen, frontier.csv and its charts written. prune/frontier/frontier_stage.h reads the candidates from what the run
// stored. Each measurement is stored in DIR/KEY-PRECISION.json atomically: a resumed run measures only what is
// missing.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/config.h"
#include "core/data/glue.h"
#include "core/model/bert.h"
#include "core/text/tokenizer.h"
#include "prune/objective/objective.h"
#include "prune/record/frontier.h"

namespace hp::prune {

// One structure: what it is (the point's fields but precision and measurements), the file stem of its measurements,
// and how to build it slimmed (called once, and only when a measurement is missing).
struct Candidate {
  FrontierPoint point;
  std::string key;
  std::function<core::Bert()> build;
};

// How the objective's frontier measures.
struct FrontierMeasure {
  const core::Config* cfg = nullptr;
  const std::atomic<bool>* stop = nullptr;
  const core::Bert* base = nullptr;  // the unpruned model at fp32: every speedup's denominator
  const core::Tokenizer* tokenizer = nullptr;  // int8's calibration (run.calibrate examples of the train split)
  // Scores each model at its precision, in points, on the evaluation split and the selection slice (whose rows the
  // intervals resample).
  const Objective* objective = nullptr;
  std::vector<std::pair<long, long>> timings;  // (batch, seq) timed; the first is the frontier's own speedup
  std::string dir;  // where the measurements are stored
  // ONNX Runtime's reference rows appended to the frontier (prune/frontier/frontier_timing.h add_ort_rows).
  std::function<void(Frontier&)> ort;
};

// Every candidate of `cands` at every native precision evaluated and timed (or read back), appended to f.points;
// the unpruned fp32 model sets f.baseline. False when stopped.
bool measure_all(const FrontierMeasure& m, const std::vector<Candidate>& cands, Frontier& f);

// The whole frontier on `f` (its header filled by the caller): `cands` measured, ONNX Runtime's rows, the slice's
// differences against the better of the unpruned model and the control, the choice (f.chosen, -1 when none is
// within D); frontier.csv and frontier(_cost).svg/.png in run.out_dir, their names appended to `files`. nullopt when
// stopped.
std::optional<Frontier> run_frontier(const FrontierMeasure& m, const std::vector<Candidate>& cands, Frontier f,
                                     std::vector<std::string>& files);

// The candidate of `cands` that point `p` measured.
const Candidate& candidate_of(const std::vector<Candidate>& cands, const FrontierPoint& p);

}  // namespace hp::prune
