// The pruning run (see prune/run/pipeline.h).
#include "prune/run/pipeline.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/base/strings.h"  // format_number
#include "core/base/version.h"
#include "core/dist/distributed.h"
#include "core/kernels/isa.h"
#include "core/kernels/lowp_gemm.h"
#include "eval/flops.h"
#include "prune/stages/best_step.h"
#include "prune/stages/budget.h"
#include "prune/embedding/embedding_run.h"
#include "prune/heads/criteria.h"
#include "prune/frontier/frontier_stage.h"
#include "prune/run/validate.h"
#include "prune/stages/layer_drop.h"
#include "prune/export/model_card.h"
#include "prune/heads/schedule.h"
#include "prune/stages/control.h"
#include "prune/stages/stages.h"

namespace hp::prune {

namespace {

// " (int8 over unpruned fp32)" when stage 8 timed the two models at different precisions (a --max-drop run's
// int8 choice), else empty.
std::string speed_precisions(const LatencySummary& l) {
  if (l.unpruned_precision == l.slim_precision) return "";
  return " (" + l.slim_precision + " over unpruned " + l.unpruned_precision + ")";
}

// " (-0.42 from the control's 89.1 after 150 steps; unpruned 88.9)": the final model against its reference.
std::string reference_clause(const ReferenceSummary& r) {
  const std::string control = r.control_steps ? "control's " + core::format_number("%.4g", r.control) + " after " +
                                                    std::to_string(r.control_steps) + " steps"
                                              : "";
  const std::string unpruned = "unpruned " + core::format_number("%.4g", r.unpruned);
  const std::string from = r.reference == "control" ? control + "; " + unpruned
                                                    : unpruned + "'s" + (control.empty() ? ", no control" : "; " + control);
  return " (" + core::format_number("%+.3g", r.delta) + " from the " + from + ")";
}

// Stage 9: summary.json (and the exported model's card), and the one result line on stdout.
void write_summary(const RunContext& ctx, RunSummary& s, const FinalModels* models) {
  const core::Config& cfg = *ctx.cfg;
  s.files = s.curves.files;
  if (s.final) {
    const FinalSummary& f = *s.final;
    if (core::dist::is_main())
      std::cout << s.task << " " << s.eval_split << ": "
                << (f.layers ? std::to_string(f.layers->choices.at(f.layers->choice).kept.size()) + "/" +
                                   std::to_string(ctx.arch.num_hidden_layers) + " layers, "
                    : f.budget && f.budget->layers_total ? std::to_string(f.budget->layers_kept) + "/" +
                                                               std::to_string(f.budget->layers_total) + " layers, "
                                                         : std::string())
                << f.heads_kept << "/" << s.heads_total << " heads"
                << (f.budget ? ", " + std::to_string(f.budget->neurons_kept) + "/" +
                                   std::to_string(f.budget->neurons_total) + " FFN neurons, " +
                                   (f.budget->hidden_total
                                        ? std::to_string(f.budget->hidden_kept) + "/" +
                                              std::to_string(f.budget->hidden_total) + " hidden channels, "
                                        : std::string()) +
                                   std::to_string(std::lround(f.budget->kept * 100)) + "% of " + f.budget->unit
                             : std::string())
                << " (" << f.method << (f.criterion.empty() ? "" : " " + f.criterion) << "): " << s.metric << " "
                << f.metrics.at(s.metric)
                << (f.metrics_fp32.empty() ? std::string()
                                           : " at " + s.precision + " (fp32 " +
                                                 core::format_number("%g", f.metrics_fp32.at(s.metric)) + ")")
                << (f.reference ? reference_clause(*f.reference) : std::string())
                << (s.frontier ? "; within " + core::format_number("%g", s.frontier->max_drop) + " of the " +
                                     s.frontier->reference + " on " + s.frontier->select_split + " (" +
                                     reference_summary(*s.frontier, true) +
                                     (cfg.prune.control ? "" : "; prune.control: false") + ")"
                               : std::string())
                << "; speedup x" << f.latency.at("batch32").speedup << speed_precisions(f.latency.at("batch32"))
                << " at batch 32 (FLOP bound x" << f.latency.at("batch32").flop_bound
                << (f.latency.at("batch32").suspect.empty() ? "" : ", above it: timing suspect") << "), x"
                << f.latency.at("batch1").speedup
                << (f.latency.at("batch1").suspect.empty() ? "" : " (timing suspect)") << " at batch 1; slimmed model in "
                << cfg.run.out_dir << "/model\n";
    s.files.push_back("model/");
    const core::BertConfig& slim = models->slim->config();
    CardInputs card{summary_json(s),          cfg.run.out_dir,        cfg.model.path,           {},
                    slim.num_attention_heads, slim.intermediate_size, core::headprune_version()};
    for (int l = 0; l < slim.num_hidden_layers; ++l) card.kept.push_back(slim.kept_heads(l));
    core::write_file_atomic(cfg.run.out_dir + "/model/README.md", model_card(card));
  }
  core::write_file_atomic(cfg.run.out_dir + "/summary.json", summary_json(s).dump(2) + "\n");
  log_stage(9, "summary",
            "wrote " + cfg.run.out_dir + "/summary.json and " + std::to_string(s.files.size()) + " more files");
}

// Stages 5-8 with prune.target_heads = N or a budget: the final model, its checks and speed. Empty when stopped.
// After the frontier (`frontier` set) its chosen candidate as measured: no search, training or recovery again.
std::optional<FinalSummary> final_model(RunContext& ctx, CurvesSummary& curves, FinalModels& models,
                                        const MaskGradients* grads, const Frontier* frontier) {
  const bool gated_budget = !frontier && grads && ctx.cfg->prune.method == core::MethodKind::kGates;
  const bool layers = ctx.cfg->prune.target_layers > 0;
  auto choice = frontier                 ? std::optional<FinalChoice>(frontier_final_choice(ctx, *frontier))
                : layers                 ? std::optional<FinalChoice>(choose_layers(ctx, *grads))
                : grads && !gated_budget ? std::optional<FinalChoice>(choose_budget(ctx, *grads))
                                         : choose_heads(ctx, curves);
  if (!choice || (!frontier && !recover(ctx, *choice))) return std::nullopt;
  if (!frontier && choice->method == ChoiceMethod::kKwon) take_best_step(ctx, *grads, *choice);
  FinalSummary f;
  models = export_and_verify(ctx, *choice, f);
  if (!frontier) {  // the frontier measured its own reference
    auto reference = final_reference(ctx, *choice, *models.slim);
    if (!reference) return std::nullopt;
    f.reference = *reference;
  }
  f.latency = measure_speed(ctx, models);
  f.heads_kept = core::count_kept(choice->keep);
  f.mask = layers ? core::format_mask({choice->keep, {}, choice->layers}) : core::format_head_mask(choice->keep);
  f.layers = choice->layer_drop;
  f.method = choice_method_name(choice->method);
  f.criterion = choice->criterion;
  f.metrics_before_recovery = choice->metrics_before_recovery;
  f.params = eval::parameter_count(models.slim->config());
  f.params_unpruned = eval::parameter_count(ctx.arch);
  f.budget = choice->budget;
  if (gated_budget) add_gates_point(ctx, *choice, curves);  // beside the search's points on the budget curves
  return f;
}

// Stage 5 with prune.max_drop: the frontier (into the summary) and its choice as the config stages 5-8 then run
// under (`chosen`, which ctx points at from here on). False when stopped. When no candidate is within D, the
// summary is written with the frontier and a ConfigError says which came closest: nothing is exported.
bool frontier_choice(RunContext& ctx, RunSummary& s, const MaskGradients& grads, std::optional<core::Config>& chosen) {
  const core::Config& cfg = *ctx.cfg;
  auto f = measure_frontier(ctx, s.curves, grads);
  if (!f) return false;
  s.frontier = *f;
  if (f->chosen < 0) {
    write_summary(ctx, s, nullptr);
    throw ConfigError(no_choice_message(*f, f->metric, cfg.run.out_dir));
  }
  const FrontierPoint& p = f->points[static_cast<size_t>(f->chosen)];
  std::ostringstream what;
  what << "chose " << frontier_label(p) << (p.variant.empty() ? "" : " (" + p.variant + ")") << ": " << f->metric << " "
       << p.select_metric << " on " << f->select_split << " (" << reference_summary(*f, true) << "; difference "
       << p.select_delta << " from the " << f->reference << ", 90% interval " << p.select_lo << " to " << p.select_hi
       << "), " << p.metric << " on " << f->split << " (" << reference_summary(*f, false) << "), x" << p.speedup
       << " at " << f->timing;
  log_stage(5, "frontier", what.str());
  if (const std::string risk = unresolved_choice(p, *f); !risk.empty()) core::log_warn("frontier", risk);
  chosen = chosen_config(cfg, *f);
  ctx.cfg = &*chosen;
  ctx.export_onnx = true;
  ctx.curves.opts = &chosen->prune;
  ctx.curves.precision = core::precision_setting(chosen->run.precision);
  ctx.speed_baseline = core::Precision::kFp32;  // stage 8 against the frontier's baseline
  s.precision = chosen->run.precision;  // the export's, as summary.json's "precision" says of a plain run
  return true;
}

}  // namespace

namespace {
int run_stages(RunContext& ctx, const core::Config& cfg) {
  if (!fine_tune(ctx)) return kInterruptedExit;  // 2
  const auto importance = score(ctx);  // 3
  if (!importance) return kInterruptedExit;
  std::optional<MaskGradients> grads;  // with a FLOPs or parameter budget (prune/stages/budget.h) or --target-layers
  const bool layers = cfg.prune.target_layers > 0;
  if ((budget_mode(cfg.prune) || layers) && !(grads = budget_gradients(ctx))) return kInterruptedExit;
  auto curve_summary = curves(ctx, *importance);  // 4
  if (!curve_summary || (grads && !layers && !budget_curves(ctx, *grads, *curve_summary))) return kInterruptedExit;

  RunSummary s;
  s.objective = ctx.objective->name();
  s.task = ctx.task->name;
  s.model = cfg.model.path;
  s.finetuned_model = ctx.model_dir;
  s.metric = ctx.task->primary_metric;
  s.heads_total = ctx.total_heads;
  s.eval_split = cfg.prune.eval_split;
  s.rank_split = ctx.cfg->prune.rank_split;
  s.select_split = ctx.select_split;
  s.precision = cfg.run.precision;
  s.rank_examples = static_cast<long>(ctx.rank_sets[0].size());
  s.curves = std::move(*curve_summary);
  std::optional<core::Config> chosen;  // prune.max_drop: the frontier's choice (prune/frontier/frontier_stage.h)
  if (cfg.prune.max_drop > 0 && !frontier_choice(ctx, s, *grads, chosen)) return kInterruptedExit;  // 5
  const bool budget = budget_mode(ctx.cfg->prune);
  FinalModels models;
  const Frontier* frontier = s.frontier ? &*s.frontier : nullptr;
  if (ctx.cfg->prune.target_heads > 0 || budget || layers || frontier) {
    s.final = final_model(ctx, s.curves, models, budget || layers ? &*grads : nullptr, frontier);  // 5-8
    if (!s.final) return kInterruptedExit;
  }
  write_summary(ctx, s, &models);  // 9
  return 0;
}
}  // namespace

int run_pruning(const core::Config& cfg, const std::atomic<bool>* stop) {
  validate_run(cfg);  // before any work, for either objective
  if (cfg.prune.objective == core::Objective::kEmbedding) return run_embedding_pruning(cfg, stop);
  RunContext ctx;
  prepare(ctx, cfg, stop);  // 1
  try {
    return run_stages(ctx, cfg);  // 2-9
  } catch (const ConfigError&) {  // a new run's folder is left as the corrected command can take it
    ctx.store->abandon_new_run();
    throw;
  }
}

}  // namespace hp::prune
