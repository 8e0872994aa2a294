// summary.json of a pruning run (stage 9 of prune/run/pipeline.h), written from RunSummary: per criterion the
// largest fraction of heads pruned within 1 point and the curve; with --target-heads the final model's
// mask, metrics, export checks and speedup. Also the stage results that feed it (curves, the choice of N).
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/data/glue.h"
#include "core/model/head_mask.h"
#include "prune/record/budget_report.h"
#include "prune/heads/curves.h"
#include "prune/record/frontier.h"

namespace hp::prune {

// Stage 4's result: the aggregated curves, what they say per criterion, and the files written.
struct CurvesSummary {
  std::vector<Aggregate> aggregates;
  std::map<std::string, double> fractions;  // criterion → largest fraction pruned within 1 point (needs a 0 point)
  std::map<std::string, double> areas;  // criterion → mean metric over the schedule
  // With points scored on the selection slice too (CurveInputs::select_too): criterion → their mean there.
  std::map<std::string, double> select_areas;
  std::vector<std::string> files;  // relative to the run folder
  std::optional<BudgetCurves> budget;  // with a budget: the budget curves (prune/stages/budget.h)
};

// A FLOPs or parameter budget's search (prune/stages/budget.h): what it kept and what each step gave.
struct BudgetSummary {
  std::string unit;  // "FLOPs" (at the evaluation split's mean length) or "parameters", of the encoder; or "latency"
  double target = 0, kept = 0;  // fractions of the unpruned encoder's (latency: of the whole model's, predicted)
  double mean_length = 0;  // tokens, the FLOPs' sequence length
  int neurons_kept = 0, neurons_total = 0;
  // The hidden channels and whole layers kept of the model's, when some were removed (else 0 and 0).
  int hidden_kept = 0, hidden_total = 0;
  int layers_kept = 0, layers_total = 0;
  std::vector<int> heads_per_layer, ffn_widths;
  std::map<std::string, std::map<std::string, double>> metrics_by_step;  // "search", "rearranged", "tuned" → metrics
  std::map<std::string, double> seconds;  // "gradients", "search", "rearrange", "tuning"
  double folded_vs_scaled_max_abs_logit_diff = 0;  // the export's fold of the scales against masking with them
  // A latency budget: "target", "predicted" (the table's) and "measured" (the slimmed model, on rank 0) in ms,
  // "batch" and "seq" the shape.
  std::map<std::string, double> latency;
  // The step exported, the best on the selection slice (prune/stages/budget.h best_step: "searched", "rearranged",
  // "tuned", "recovered"), and each step's metric there in points; empty without a selection slice.
  std::string selected_step;
  std::map<std::string, double> selection_metrics;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(BudgetSummary, unit, target, kept, mean_length, neurons_kept,
                                                neurons_total, hidden_kept, hidden_total, layers_kept, layers_total,
                                                heads_per_layer, ffn_widths, metrics_by_step, seconds,
                                                folded_vs_scaled_max_abs_logit_diff, latency, selected_step,
                                                selection_metrics)

// What `keep` keeps, into b: heads and FFN width per layer, the FFN neurons kept of all, and the hidden channels and
// whole layers when it removes some (else 0 and 0).
void describe_structure(const core::StructureMask& keep, BudgetSummary& b);

// --target-layers N (prune/stages/layer_drop.h): the layers each choice keeps (original indices) and its metrics with the
// others removed, before recovery; which one was exported; each layer's block-Fisher loss.
struct LayerChoice {
  std::vector<int> kept;
  std::map<std::string, double> metrics;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LayerChoice, kept, metrics)
struct LayerDropSummary {
  std::string choice;
  std::map<std::string, LayerChoice> choices;  // "fisher", "top", "alternate"
  std::vector<double> fisher_loss;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LayerDropSummary, choice, choices, fisher_loss)

// Stages 5 and 6: which heads stay, by what method, and the model (after recovery) they stay in.
// What made the final choice: a criterion's ranking, gates, the search, whole layers, or the frontier's pick of the
// unpruned model or a model of prune.frontier_models.
enum class ChoiceMethod { kCriterion, kGates, kKwon, kLayers, kUnpruned, kModel };
std::string choice_method_name(ChoiceMethod m);  // "criterion", "gates", …, "model": summary.json's "method"
struct FinalChoice {
  ChoiceMethod method = ChoiceMethod::kCriterion;
  std::string criterion;  // the ranking used; empty for gates and kwon
  core::HeadSet keep;
  core::NeuronSet neurons;  // gates under a budget: the FFN neurons kept (masked in model_dir); empty = all
  std::string model_dir;  // all heads present, the pruned ones masked; already slimmed when `slimmed`
  bool slimmed = false;  // kwon: model_dir holds the slimmed model with the tuning scales folded in
  std::map<std::string, double> metrics_before_recovery;  // empty for gates
  std::optional<BudgetSummary> budget;  // kwon, and gates under a budget
  std::vector<bool> layers;  // --target-layers or layer gates: keep[l] of the unpruned model's layers; empty = all
  std::vector<bool> hidden;  // hidden gates: keep[c] of the hidden channels; empty = all kept
  std::optional<LayerDropSummary> layer_drop;
};

// Stage 8, one batch size.
struct LatencySummary {
  long seq = 0;
  double unpruned_ms = 0, slim_ms = 0, speedup = 0, flop_bound = 0, fraction_of_bound = 0;
  // "fp32", "int8", …: the same but after a --max-drop run's int8 choice (timed against unpruned fp32)
  std::string unpruned_precision = {}, slim_precision = {};
  std::string suspect = {};  // why the speed-up is not to be believed (eval::time_side_by_side); empty when it is
};

// summary.json's "final" section.
// A --max-drop run's ONNX files beside the export, each "checked …", "skipped: why" or "not written: why".
struct OnnxFiles {
  std::string fp32;  // model.onnx
  std::string int8;  // model.int8.onnx, when int8 was chosen (else empty)
  std::map<std::string, double> int8_metrics;  // ONNX Runtime's on the evaluation split, when written
};

// What the final model is compared with (prune.control): the unpruned model, and the control — the unpruned model
// trained as many steps as the final model's own training (its recovery or gates run) with the same recovery —, each
// on the evaluation split and the selection slice, in points; the reference is the better of the two on the slice
// (the unpruned model on a tie). control_steps 0: no control (the final model trained nothing, or prune.control off).
struct ReferenceSummary {
  std::string reference = "unpruned";
  double unpruned = 0, unpruned_select = 0;
  long control_steps = 0;
  double control = 0, control_select = 0;
  double delta = 0, select_delta = 0;  // the final model's metric minus the reference's, at the export's precision
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ReferenceSummary, reference, unpruned, unpruned_select, control_steps,
                                                control, control_select, delta, select_delta)

struct FinalSummary {
  double slim_vs_masked_max_abs_logit_diff = 0;  // an embedding run: the export's embeddings against the model's
  std::map<std::string, std::string> hf_check;  // check → "passed (…)" or "skipped (…)"
  std::map<std::string, LatencySummary> latency;  // "batch1", "batch32"; empty on ranks other than 0
  int heads_kept = 0;
  std::string mask, method, criterion;  // criterion: only when method is "criterion"
  // The step exported where the run chose between the masked and the recovered model (an embedding run's
  // --target-heads: the closer to the teacher on the selection slice); empty: the recovered one.
  std::string selected_step;
  std::map<std::string, double> metrics_before_recovery, metrics;  // metrics: at the run's precision, as chosen
  std::map<std::string, double> metrics_fp32;  // the export at fp32, when `metrics` are at bf16 or int8
  std::string model_dir = "model";
  long params = 0, params_unpruned = 0;
  std::optional<BudgetSummary> budget;  // with a FLOPs or parameter budget
  std::optional<OnnxFiles> onnx;  // with prune.max_drop
  std::optional<LayerDropSummary> layers;  // with prune.target_layers
  std::optional<ReferenceSummary> reference;  // without prune.max_drop (the frontier keeps its own)
};

struct RunSummary {
  // What the model was pruned for (Objective::name, prune/objective/objective.h): "sequence_classification",
  // "regression", "token_classification" (a task's head) or "embedding" (a sentence-transformers folder's embeddings).
  std::string objective;
  std::string task, model, finetuned_model, metric, eval_split, rank_split;
  std::string select_split;  // where the run's choices were made (prune/data/selection.h)
  std::string precision = "fp32";  // run.precision: of the curve points and the speed measurement
  int heads_total = 0;
  long rank_examples = 0;
  CurvesSummary curves;
  std::optional<FinalSummary> final;  // with prune.target_heads > 0
  std::optional<Frontier> frontier;  // with prune.max_drop > 0 (prune/frontier/frontier_stage.h)
  std::vector<std::string> files;
};

// summary.json's object.
nlohmann::json summary_json(const RunSummary& s);

}  // namespace hp::prune
