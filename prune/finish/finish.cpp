// The end every pruning run shares (see prune/finish/finish.h).
#include "prune/finish/finish.h"

#include <cmath>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/base/strings.h"
#include "core/base/version.h"
#include "core/dist/distributed.h"
#include "eval/flops.h"
#include "prune/export/model_card.h"
#include "prune/frontier/frontier_stage.h"
#include "prune/stages/best_step.h"
#include "prune/stages/budget.h"
#include "prune/stages/control.h"
#include "prune/stages/layer_drop.h"

namespace hp::prune {

namespace fs = std::filesystem;

namespace {

// " (int8 over unpruned fp32)" when stage 8 timed the two models at different precisions (a --max-drop run's
// int8 choice), else empty.
std::string speed_precisions(const LatencySummary& l) {
  if (l.unpruned_precision == l.slim_precision) return "";
  return " (" + l.slim_precision + " over unpruned " + l.unpruned_precision + ")";
}

// A speed-up as the result line prints it, to three digits ("1.21"): timings repeat to a few percent at best.
std::string speedup(double x) { return core::format_number("%.3g", x); }

// "0.19 epoch (step 400 of 600)": how long the unpruned model was fine-tuned, read from the train_result.json
// beside it (stage 2's RUN_DIR/finetune, or a `prune train` run's folder given as model.path); empty where none is.
std::string unpruned_training(const RunContext& ctx) {
  const std::string file = fs::path(ctx.model_dir).parent_path().string() + "/train_result.json";
  if (!fs::exists(file)) return "";
  const auto j = nlohmann::json::parse(core::read_file(file));
  const long best = j.value("best_step", -1L), per_epoch = j.value("steps_per_epoch", 0L);
  if (best <= 0 || per_epoch <= 0) return "";
  const double epochs = static_cast<double>(best) / static_cast<double>(per_epoch);
  return core::format_number("%.2g", epochs) + (epochs > 1 ? " epochs" : " epoch") + " (step " + std::to_string(best) +
         " of " + std::to_string(j.value("steps", 0L)) + ")";
}

// " (-0.42 from the control's 89.1 after 150 steps; unpruned model's 88.9 after 0.19 epoch (step 400 of 600))": the
// final model against its reference, in points; `trained` is unpruned_training's.
std::string reference_clause(const ReferenceSummary& r, const std::string& trained) {
  const std::string control = r.control_steps ? "control's " + core::format_number("%.4g", r.control) + " after " +
                                                    std::to_string(r.control_steps) + " steps"
                                              : "";
  const std::string unpruned =
      "unpruned model's " + core::format_number("%.4g", r.unpruned) + (trained.empty() ? "" : " after " + trained);
  const std::string from = r.reference == "control" ? control + "; " + unpruned
                                                    : unpruned + (control.empty() ? ", no control" : "; " + control);
  return " (" + core::format_number("%+.3g", r.delta) + " from the " + from + ")";
}

}  // namespace

RunSummary run_summary(const RunContext& ctx) {
  const core::Config& cfg = *ctx.cfg;
  RunSummary s;
  s.objective = ctx.objective->name();
  s.task = ctx.task->name;
  s.model = cfg.model.path;
  s.finetuned_model = ctx.model_dir;
  s.metric = ctx.objective->task().primary_metric;
  s.heads_total = ctx.total_heads;
  s.eval_split = cfg.prune.eval_split;
  s.rank_split = cfg.prune.rank_split;
  s.select_split = ctx.select_split;
  s.precision = cfg.run.precision;
  s.rank_examples = static_cast<long>(ctx.rank_sets.at(0).size());
  return s;
}

void write_summary(const RunContext& ctx, RunSummary& s, const FinalModels* models) {
  const core::Config& cfg = *ctx.cfg;
  s.files = s.curves.files;
  if (s.final) {
    const FinalSummary& f = *s.final;
    const std::string trained = unpruned_training(ctx);
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
                << core::format_number("%.4g", 100 * f.metrics.at(s.metric))
                << (f.metrics_fp32.empty() ? std::string()
                                           : " at " + s.precision + " (fp32 " +
                                                 core::format_number("%.4g", 100 * f.metrics_fp32.at(s.metric)) + ")")
                << (f.reference ? reference_clause(*f.reference, trained) : std::string())
                << (s.frontier ? "; within " + core::format_number("%g", s.frontier->max_drop) + " of the " +
                                     s.frontier->reference + " on " + s.frontier->select_split + " (" +
                                     reference_summary(*s.frontier, true) +
                                     (trained.empty() ? "" : "; unpruned fine-tuned " + trained) +
                                     (cfg.prune.control ? "" : "; prune.control: false") + ")"
                               : std::string())
                << "; speedup x" << speedup(f.latency.at("batch32").speedup)
                << speed_precisions(f.latency.at("batch32")) << " at batch 32 (FLOP bound x"
                << speedup(f.latency.at("batch32").flop_bound)
                << (f.latency.at("batch32").suspect.empty() ? "" : ", above it: timing suspect") << "), x"
                << speedup(f.latency.at("batch1").speedup)
                << (f.latency.at("batch1").suspect.empty() ? "" : " (timing suspect)") << " at batch 1; "
                << (ctx.objective->export_kind() == ExportKind::kTransformers ? "slimmed model"
                                                                              : "sentence-transformers folder")
                << " in " << cfg.run.out_dir << "/model\n";
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

void adopt_frontier_choice(RunContext& ctx, RunSummary& s, const Frontier& frontier,
                           std::optional<core::Config>& chosen) {
  const core::Config& cfg = *ctx.cfg;
  const Frontier* f = &*(s.frontier = frontier);
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
}

}  // namespace hp::prune
