// The compression frontier (`prune --max-drop D`) as data: every candidate model the run measured —
// a method at a budget at a precision — with its metric on the evaluation split and its measured speedup over
// the unpruned fp32 model, the Pareto front over (speedup, metric), and the choice: the fastest candidate whose
// metric is within D points of the unpruned fp32 model's. The unpruned fp32 model and ONNX Runtime's rows are
// reference points: drawn and written, never chosen. Torch-free (the stage that measures the candidates fills these structs).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/data/glue.h"  // TaskSpec
#include "core/plot/plot.h"
#include "eval/metrics.h"  // RowMetric

namespace hp::prune {

// What made a frontier point: the unpruned model, a criterion's head ranking, the budget search, the gates, a
// folder of prune.frontier_models, ONNX Runtime, the control (the unpruned model trained as long as the
// longest-trained candidate, prune.control). Written by name ("kwon") in frontier.csv, the state and summary.json; a
// name read back that is none of these is an InputError.
enum class PointMethod { kUnpruned, kHeads, kKwon, kGates, kModel, kOnnxRuntime, kControl };
const std::string& point_method_name(PointMethod m);
PointMethod parse_point_method(const std::string& name);  // InputError naming an unknown one
void to_json(nlohmann::json& j, PointMethod m);
void from_json(const nlohmann::json& j, PointMethod& m);

struct FrontierPoint {
  PointMethod method = PointMethod::kUnpruned;
  std::string criterion;  // heads: the ranking's criterion
  std::string budget;     // as a person reads it: "36 heads", "50% FLOPs", "" for the unpruned model
  std::string precision;  // "fp32", "bf16" or "int8"
  int step = -1;          // heads: the schedule's index; kwon: the budget curves' point (budget_schedule's index,
                          // or 100 + the percent for a refined budget); gates: the FLOPs percent trained
                          // to; -1 for the others
  int heads_kept = 0;
  double flops_kept = 1;  // of the unpruned encoder's (FLOPs at the evaluation split's mean length)
  double metric = 0;      // on the evaluation split, in points (accuracy 0.91 → 91): reported, never chosen on
  double select_metric = 0;  // on the selection slice (prune/data/selection.h), in points: what the choice reads
  // select_metric − select_baseline with its 90% paired-bootstrap interval on the slice (eval::paired_bootstrap):
  // how far the slice's verdict can be trusted. 0 for the baseline itself and ONNX Runtime's rows.
  double select_delta = 0, select_lo = 0, select_hi = 0;
  std::vector<float> select_predictions;  // per slice example, for the interval; kept in the run's state only
  std::string variant;    // kwon: the step of the search whose model this is, the best on the selection slice of
                          // "searched", "rearranged", "tuned", "recovered"; empty for the others
  std::string model;      // method "model" (prune.frontier_models): the folder measured
  double cost_s = 0;      // seconds of search and training that made this structure (0: none of its own)
  double speedup = 0;     // at the timing chosen on: unpruned fp32 (headprune) time over this candidate's time
  std::map<std::string, double> speedups;  // every timing measured, e.g. "b1_mean", "b32_128" (the CSV's columns)
  bool reference = false;  // the unpruned fp32 model and ONNX Runtime: measured beside, never chosen
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(FrontierPoint, method, criterion, budget, precision, step, heads_kept,
                                                flops_kept, metric, select_metric, select_delta, select_lo, select_hi,
                                                variant, model, cost_s, speedup, speedups, reference)

// A candidate's measurement in the run's state (STATE/frontier/<key>-<precision>.json): the point with its slice
// predictions (which summary.json leaves out), written atomically. read_point: nullopt for a file written before the
// selection slice, to be measured again; InputError naming a file that is not a measurement.
void write_point(const std::string& file, const FrontierPoint& p);
std::optional<FrontierPoint> read_point(const std::string& file);

// Appends a measured point to f.points. The unpruned model at fp32 and the control at fp32 are reference points,
// never chosen; the better of the two on the selection slice (the unpruned model on a tie) is the baseline
// (f.baseline, f.select_baseline, f.reference), whatever else is unpruned among the candidates: the unpruned model
// quantised, the search's 100% point, a criterion's ranking with nothing pruned stay candidates.
struct Frontier;
void add_measured(Frontier& f, FrontierPoint p);

// The point the frontier's differences are taken from (f.reference's, at fp32); null before it is measured.
const FrontierPoint* reference_point(const Frontier& f);
// "the unpruned fp32 model's" or "the control's (…)": whose metric the choice is within D of, as messages say it.
std::string reference_words(const Frontier& f);
// The reference and the other of the two on the selection slice (`select`) or the evaluation split, the reference
// first: "control 89.8, unpruned fp32 89" or "unpruned fp32 89, control 88.7" ("unpruned fp32 89" without a control).
std::string reference_summary(const Frontier& f, bool select);

// Each point's select_delta (select_metric − f.select_baseline) and its 90% paired-bootstrap interval against the
// reference point on the slice (eval::paired_bootstrap of `metric` over `gold`, `resamples`,
// `seed`; in points), where both points kept their slice predictions — else lo = hi = the difference. ONNX
// Runtime's rows (never on the slice) keep 0.
void add_select_deltas(Frontier& f, const eval::RowMetric& metric, const std::vector<float>& gold, int resamples,
                       unsigned long long seed);

// "heads taylor 36 heads int8": the parts a person needs, without the empty ones.
std::string frontier_label(const FrontierPoint& p);

struct Frontier {
  std::string task, metric, split;  // e.g. "sst2", "accuracy", "dev"
  std::string select_split;         // where the choice is made, e.g. "train[-1000:]"
  std::string timing;               // what `speedup` measures, e.g. "batch 32 x 128 tokens"
  double baseline = 0;              // the reference's metric, points
  double select_baseline = 0;       // its select_metric: max_drop is measured from here
  // The reference: "unpruned" (the unpruned fp32 model), or "control" where the control scored higher on the slice.
  std::string reference = "unpruned";
  double unpruned_metric = 0, unpruned_select = 0;  // the unpruned fp32 model's, whichever is the reference
  double max_drop = 0;              // D
  std::vector<FrontierPoint> points;
  int chosen = -1;  // index into points; -1 when none is within max_drop
  std::string onnxruntime;  // its reference rows: "onnxruntime 1.18.1", or "skipped: why"
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Frontier, task, metric, split, select_split, timing, baseline,
                                                select_baseline, reference, unpruned_metric, unpruned_select, max_drop,
                                                points, chosen, onnxruntime)

// Indices of the points no other point dominates (another at least as fast and at least as accurate, and
// strictly better in one), by increasing speedup; a point without a finite metric and speedup is on no front. Of
// points equal in both, the first is kept. Reference points
// take part: a candidate that ONNX Runtime beats in both is not on the front.
std::vector<std::size_t> pareto_front(const std::vector<FrontierPoint>& points);

// The fastest candidate (reference points and undefined metrics, e.g. a correlation of constant predictions,
// excluded) whose select_metric is at least select_baseline − max_drop (to 1e-9 points) and that runs faster than
// the unpruned fp32 model (speedup > 1: a choice slower than doing nothing is never made); of equally fast ones the
// more accurate on the selection slice, then the first. The evaluation split's `metric` is never read: it is what
// the run reports. nullopt when none is.
std::optional<std::size_t> choose_within(const std::vector<FrontierPoint>& points, double select_baseline,
                                         double max_drop);

// The frontier's choice: choose_within its points against its selection slice's baseline (select_baseline, never
// the evaluation split's `baseline`) and its max_drop.
std::optional<std::size_t> choose(const Frontier& f);

// Why choose_within found nothing, as the refusal says it (`metric`: the metric's name; `folder`: the run folder):
// no candidate within D (naming the closest), or candidates within D none of which beats the unpruned fp32 model
// (naming the fastest of them), so that the unpruned model as it is is the answer. Nothing is exported either way.
std::string no_choice_message(const Frontier& f, const std::string& metric, const std::string& folder);

// What the choice risks when the selection slice is too small to tell max_drop apart: a warning when the chosen
// point's 90% interval on the slice is wider than 2·max_drop (its difference from the unpruned model could then be
// D off either way, and the evaluation split may put it more than D down), "" when it is narrower or no interval was
// drawn (prune.bootstrap 0).
std::string unresolved_choice(const FrontierPoint& chosen, const Frontier& f);

// The FLOPs fractions the gates are trained at, by prune.frontier_gates (`setting`): percents in (0, 100), or
// [auto]: the cheapest point of the budget search (kwon, fp32) whose select_metric is
// within 2·max_drop of f.select_baseline; [] none. Ascending, without repeats. ConfigError naming the entry that is neither.
std::vector<double> frontier_gate_budgets(const std::vector<std::string>& setting, const Frontier& f);

// Where the budget search is refined (prune.frontier_refine): the schedule's points are 10 percent apart, and
// the choice within D is made between the deepest budget whose search candidate is within max_drop of
// f.select_baseline on the slice at some precision and the next deeper budget measured, which is not. Their midpoint
// in whole percent of the FLOPs kept, when they are more than `min_gap` percent apart (and it is not measured yet);
// nullopt when nothing is within D, when the deepest budget measured is, or when they are that close.
std::optional<int> refine_budget(const Frontier& f, int min_gap);
// The gap both frontiers refine down to: budgets closer than this differ by less than a timing's scatter.
inline constexpr int kRefineGapPercent = 2;

// frontier.csv: one row per point, the speedup of every timing any point has (empty where it has none), the
// selection metric, the variant and the cost in seconds, whether it is on the Pareto front and whether it was chosen.
std::string frontier_csv(const Frontier& f);
// What each candidate cost to make (seconds of search and training, log x) against its metric: one marker
// series per method (fp32 rows only: a precision costs no training), the chosen point ringed.
core::LineChart frontier_cost_chart(const Frontier& f);
// The metric against the speedup (log x): one marker series per method and precision, ONNX Runtime's points,
// the Pareto front as a line, the chosen point, and the baseline − D line dashed.
core::LineChart frontier_chart(const Frontier& f);

}  // namespace hp::prune
