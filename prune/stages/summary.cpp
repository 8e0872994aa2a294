// summary.json from RunSummary (see prune/stages/summary.h).
#include "prune/stages/summary.h"

namespace hp::prune {

namespace {

nlohmann::json criteria_json(const CurvesSummary& c) {
  nlohmann::json j;
  for (const auto& [name, f] : c.fractions) j[name]["largest_fraction_pruned_within_1_point"] = f;
  for (const auto& [name, a] : c.areas) j[name]["mean_metric_over_schedule"] = a;
  for (const auto& a : c.aggregates)
    j[a.criterion]["curve"].push_back({{"heads_pruned", a.pruned}, {"mean", a.mean}, {"ci_lo", a.lo}, {"ci_hi", a.hi}});
  return j;
}

nlohmann::json final_json(const FinalSummary& f) {
  nlohmann::json j;
  j["slim_vs_masked_max_abs_logit_diff"] = f.slim_vs_masked_max_abs_logit_diff;
  j["hf_check"] = nlohmann::json::object();
  for (const auto& [check, result] : f.hf_check) j["hf_check"][check] = result;
  j["latency"] = nlohmann::json::object();
  for (const auto& [batch, l] : f.latency)
    j["latency"][batch] = {
        {"seq", l.seq},         {"unpruned_ms", l.unpruned_ms}, {"slim_ms", l.slim_ms},
        {"speedup", l.speedup}, {"flop_bound", l.flop_bound},   {"fraction_of_bound", l.fraction_of_bound},
        {"unpruned_precision", l.unpruned_precision}, {"slim_precision", l.slim_precision}};
  for (const auto& [batch, l] : f.latency)
    if (!l.suspect.empty()) j["latency"][batch]["suspect"] = l.suspect;
  j["heads_kept"] = f.heads_kept;
  j["mask"] = f.mask;
  j["method"] = f.method;
  if (!f.criterion.empty()) j["criterion"] = f.criterion;
  if (!f.selected_step.empty()) j["selected_step"] = f.selected_step;
  j["metrics_before_recovery"] = f.metrics_before_recovery;
  j["metrics"] = f.metrics;
  if (!f.metrics_fp32.empty()) j["metrics_fp32"] = f.metrics_fp32;
  j["model_dir"] = f.model_dir;
  j["params"] = f.params;
  j["params_unpruned"] = f.params_unpruned;
  if (f.budget) j["budget"] = *f.budget;
  if (f.layers) j["layers"] = *f.layers;
  if (f.reference) j["reference"] = *f.reference;
  if (f.onnx) {
    j["onnx"]["model.onnx"] = f.onnx->fp32;
    if (!f.onnx->int8.empty()) j["onnx"]["model.int8.onnx"] = f.onnx->int8;
    if (!f.onnx->int8_metrics.empty()) j["onnx"]["int8_metrics"] = f.onnx->int8_metrics;
  }
  return j;
}

}  // namespace

std::string choice_method_name(ChoiceMethod m) {
  switch (m) {
    case ChoiceMethod::kCriterion: return "criterion";
    case ChoiceMethod::kGates: return core::choice_text(core::Method{core::MethodKind::kGates, ""});
    case ChoiceMethod::kKwon: return core::choice_text(core::Method{core::MethodKind::kKwon, ""});
    case ChoiceMethod::kLayers: return "layers";
    case ChoiceMethod::kUnpruned: return "unpruned";
    case ChoiceMethod::kModel: return "model";
  }
  return "";
}

nlohmann::json summary_json(const RunSummary& s) {
  nlohmann::json j = {{"objective", s.objective},
                      {"task", s.task},
                      {"model", s.model},
                      {"finetuned_model", s.finetuned_model},
                      {"metric", s.metric},
                      {"heads_total", s.heads_total},
                      {"eval_split", s.eval_split},
                      {"rank_split", s.rank_split},
                      {"select_split", s.select_split},
                      {"rank_examples", s.rank_examples},
                      {"precision", s.precision},
                      {"files", s.files}};
  const nlohmann::json criteria = criteria_json(s.curves);
  if (!criteria.is_null()) j["criteria"] = criteria;
  if (s.curves.budget) j["budget_curves"] = *s.curves.budget;
  if (s.frontier) j["frontier"] = *s.frontier;
  if (s.final) j["final"] = final_json(*s.final);
  return j;
}

void describe_structure(const core::StructureMask& keep, BudgetSummary& b) {
  b.heads_per_layer.clear(), b.ffn_widths.clear();
  b.neurons_total = 0;
  for (size_t l = 0; l < keep.heads.size(); ++l) {
    b.heads_per_layer.push_back(core::count_kept({keep.heads[l]}));
    b.ffn_widths.push_back(core::count_kept({keep.neurons[l]}));
    b.neurons_total += static_cast<int>(keep.neurons[l].size());
  }
  b.neurons_kept = core::count_kept(keep.neurons);
  if (!keep.hidden.empty())
    b.hidden_kept = core::count_kept({keep.hidden}), b.hidden_total = static_cast<int>(keep.hidden.size());
  const int L = static_cast<int>(keep.layers.size());
  if (L > 0 && core::count_kept_layers(keep.layers, L) < L)
    b.layers_kept = core::count_kept_layers(keep.layers, L), b.layers_total = L;
}

}  // namespace hp::prune
