// Which prune.* keys each mode uses (see prune/run/key_use.h).
#include "prune/run/key_use.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "prune/heads/criterion_names.h"

namespace hp::prune {

namespace {

using P = core::PruneConfig;

bool has(const std::vector<std::string>& list, const char* name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}
// The criteria the run scores: prune.frontier_criteria in place of prune.criteria under --max-drop (stages_curves.cpp).
const std::vector<std::string>& scored(const P& p) {
  return p.max_drop > 0 && !p.frontier_criteria.empty() ? p.frontier_criteria : p.criteria;
}
// One of `names` scores from a gated run (prune/heads/criteria.h); unknown names are the validation's to refuse.
bool reads_gated_run(const std::vector<std::string>& names) {
  return std::any_of(names.begin(), names.end(), criterion_reads_gated_run);
}
bool always(const P&) { return true; }
// As prune/stages/budget.h budget_mode: a FLOPs, parameter or latency budget, or --max-drop (a FLOPs budget run).
bool budget(const P& p) { return p.target_flops > 0 || p.target_params > 0 || p.target_latency > 0 || p.max_drop > 0; }
// Stages 5-8 run: a final model is chosen, recovered and exported.
bool final_model(const P& p) { return p.target_heads > 0 || p.target_layers > 0 || budget(p); }
// The recovery distils (prune.distill_hidden and prune.distill_tasks add to it), or the embedding run's does.
bool distils(const P& p) {
  return p.objective == core::Objective::kEmbedding || (final_model(p) && p.recover_steps > 0 && p.recover_distill);
}
constexpr const char* kDistils =
    "a run that recovers by distillation (prune.recover_steps > 0, prune.recover_distill) or prune.objective: "
    "embedding";

// A field's value as text, to compare with the default's.
template <class T>
std::string text(const T& v) {
  if constexpr (std::is_enum_v<T> || std::is_same_v<T, core::Method>) {
    return core::choice_text(v);
  } else {
    std::ostringstream o;
    o << v;
    return o.str();
  }
}
template <class T>
std::string text(const std::vector<T>& v) {
  std::string out = "[";
  for (const auto& x : v) out += text(x) + ",";
  return out + "]";
}

struct Collect {
  std::vector<std::pair<std::string, std::string>> fields;
  template <class T>
  void operator()(const char* key, T& value, const char*) {
    fields.emplace_back(key, text(value));
  }
};

std::vector<std::pair<std::string, std::string>> fields_of(P p) {
  Collect c;
  p.visit_fields(c);
  return c.fields;
}

}  // namespace

const std::vector<KeyUse>& key_use_table() {
  static const std::vector<KeyUse> rows = {
      // The head criteria's curves run in every mode; the targets are the modes themselves.
      {"criteria", always, ""},
      {"rank_split", always, ""},
      {"rank_examples", always, ""},
      {"rank_batch_size", always, ""},
      {"eval_split", always, ""},
      {"select_examples", [](const P& p) { return p.select_split.empty(); },
       "a run without prune.select_split (its choices on rows held out of training)"},
      {"select_split", always, ""},
      {"schedule", always, ""},
      {"schedule_unit", always, ""},
      {"per_layer", always, ""},
      {"min_heads_per_layer", always, ""},
      {"iterative", always, ""},
      {"seeds", always, ""},
      {"bootstrap", always, ""},
      {"normalize_layers", [](const P& p) { return has(scored(p), "taylor"); },
       "the taylor criterion (prune.criteria; prune.frontier_criteria with --max-drop)"},
      {"taylor_token_level", [](const P& p) { return has(scored(p), "taylor"); },
       "the taylor criterion (prune.criteria; prune.frontier_criteria with --max-drop)"},
      {"attattr_steps", [](const P& p) { return has(scored(p), "attattr"); },
       "the attattr criterion (prune.criteria; prune.frontier_criteria with --max-drop)"},
      {"attattr_riemann", [](const P& p) { return has(scored(p), "attattr"); },
       "the attattr criterion (prune.criteria; prune.frontier_criteria with --max-drop)"},
      {"attattr_target", [](const P& p) { return has(scored(p), "attattr"); },
       "the attattr criterion (prune.criteria; prune.frontier_criteria with --max-drop)"},
      {"target_heads", always, ""},
      {"target_layers", always, ""},
      {"layer_choice", [](const P& p) { return p.target_layers > 0; }, "--target-layers N"},
      {"target_flops", always, ""},
      {"target_params", always, ""},
      {"target_latency", always, ""},
      {"max_drop", always, ""},
      {"frontier_precisions", [](const P& p) { return p.max_drop > 0; }, "--max-drop D"},
      {"frontier_criteria", [](const P& p) { return p.max_drop > 0; }, "--max-drop D"},
      {"frontier_gates", [](const P& p) { return p.max_drop > 0; }, "--max-drop D"},
      {"frontier_refine", [](const P& p) { return p.max_drop > 0; }, "--max-drop D"},
      {"frontier_time", [](const P& p) { return p.max_drop > 0; }, "--max-drop D"},
      {"frontier_models", [](const P& p) { return p.max_drop > 0; }, "--max-drop D"},
      {"latency_batch", [](const P& p) { return p.latency || p.target_latency > 0 || p.max_drop > 0; },
       "the latency measurements (prune.latency, --target-latency MS, --max-drop D)"},
      {"latency_seq", [](const P& p) { return p.latency || p.target_latency > 0 || p.max_drop > 0; },
       "the latency measurements (prune.latency, --target-latency MS, --max-drop D)"},
      {"structures", budget, "a FLOPs, parameter or latency budget or --max-drop D"},
      {"search_examples",
       [](const P& p) { return budget(p) || p.target_layers > 0 || p.objective == core::Objective::kEmbedding; },
       "a budget, --max-drop D, --target-layers N or prune.objective: embedding (its heads rank on these sentences)"},
      {"budget_schedule", budget, "a FLOPs, parameter or latency budget or --max-drop D"},
      {"hidden_widths", [](const P& p) { return budget(p) && has(p.structures, "hidden"); },
       "a budget search with hidden in prune.structures"},
      {"layer_counts", [](const P& p) { return budget(p) && has(p.structures, "layers"); },
       "a budget search with layers in prune.structures"},
      {"rearrange", budget, "a FLOPs, parameter or latency budget or --max-drop D"},
      {"mask_tuning", budget, "a FLOPs, parameter or latency budget or --max-drop D"},
      {"tuning_damping", [](const P& p) { return budget(p) && p.mask_tuning; },
       "a budget search with prune.mask_tuning"},
      {"curve_recover_steps", budget, "a FLOPs, parameter or latency budget or --max-drop D"},
      {"method", always, ""},
      {"gates_run", [](const P& p) { return reads_gated_run(scored(p)); },
       "the gates criterion (prune.criteria; prune.frontier_criteria with --max-drop)"},
      {"recover_steps", final_model,
       "a run that exports a model (--target-heads, --target-layers, a budget, --max-drop)"},
      {"recover_scale", [](const P& p) { return budget(p) && p.recover_steps > 0; },
       "a budget run that recovers its choices (prune.recover_steps > 0)"},
      {"recover_distill", [](const P& p) { return final_model(p) && p.recover_steps > 0; },
       "a run that recovers its model (prune.recover_steps > 0 with a target)"},
      {"finetune", always, ""},
      {"new_classifier", always, ""},
      {"objective", always, ""},
      {"distill_tasks", distils, kDistils},
      {"distill_hidden", distils, kDistils},
      {"latency", always, ""},
      {"verify", final_model, "a run that exports a model (--target-heads, --target-layers, a budget, --max-drop)"},
      {"control", final_model, "a run that exports a model (--target-heads, --target-layers, a budget, --max-drop)"},
  };
  return rows;
}

std::vector<std::string> unused_settings(const core::PruneConfig& p) {
  std::map<std::string, std::string> defaults;
  for (const auto& [key, value] : fields_of(P{})) defaults[key] = value;
  std::map<std::string, const KeyUse*> rows;
  for (const auto& r : key_use_table()) rows[r.key] = &r;
  std::vector<std::string> out;
  for (const auto& [key, value] : fields_of(p)) {
    const auto row = rows.find(key);
    if (value == defaults[key] || row == rows.end() || row->second->used(p)) continue;
    out.push_back("prune." + key + " is set but this run does not use it: only " + row->second->only + " does");
  }
  return out;
}

std::vector<std::string> prune_keys() {
  std::vector<std::string> keys;
  for (const auto& [key, value] : fields_of(P{})) keys.push_back(key);
  return keys;
}

}  // namespace hp::prune
