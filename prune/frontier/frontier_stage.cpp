// The frontier stage (see prune/frontier/frontier_stage.h).
#include "prune/frontier/frontier_stage.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/dist/distributed.h"
#include "core/io/checkpoint.h"
#include "eval/evaluator.h"
#include "eval/flops.h"
#include "eval/latency.h"
#include "eval/metrics.h"
#include "prune/stages/best_step.h"
#include "prune/stages/budget.h"
#include "prune/stages/control.h"
#include "prune/frontier/frontier_timing.h"
#include "prune/frontier/measure.h"
#include "prune/export/onnx.h"
#include "prune/export/slim.h"
#include "train/task_run.h"

namespace hp::prune {

namespace fs = std::filesystem;

namespace {

std::string percent(double fraction) { return std::to_string(std::lround(100 * fraction)) + "%"; }

// The unpruned model and the best head criterion at each count of the schedule (neither empty nor whole), when
// head curves were drawn.
std::vector<Candidate> head_candidates(const RunContext& ctx, const CurvesSummary& curves) {
  const core::Bert& model = *ctx.model;
  std::vector<Candidate> out;
  Candidate unpruned{{}, "unpruned", [&model] { return model; }};
  unpruned.point.method = PointMethod::kUnpruned, unpruned.point.heads_kept = ctx.total_heads;
  out.push_back(unpruned);
  if (curves.areas.empty()) return out;  // no head curves drawn (an embedding's --max-drop)
  std::string why;
  const std::string crit = best_criterion(curves, &why);
  // The encoder's part of a curve point's FLOPs (per example at the mean length), as budget_unit counts them.
  const long S = std::max(1L, std::lround(ctx.objective->mean_length()));
  const double encoder = eval::encoder_flops(ctx.arch, S), fixed = eval::forward_flops(ctx.arch, 1, S) - encoder;
  for (size_t step = 0; step < ctx.curves.counts.size(); ++step) {
    const int pruned = ctx.curves.counts[step];
    if (pruned == 0 || pruned == ctx.total_heads) continue;
    const auto stored = ctx.store->load_point(crit, ctx.cfg->run.seed, static_cast<int>(step));
    HP_CHECK(stored, "frontier: the " + crit + " curve has no point " + std::to_string(step));
    const core::HeadSet keep =
        core::parse_head_mask(stored->mask, ctx.arch.num_hidden_layers, ctx.arch.num_attention_heads, "curve point");
    Candidate c{{}, "heads-" + crit + "-" + std::to_string(step), [&model, keep] { return slim_model(model, keep); }};
    c.point.method = PointMethod::kHeads, c.point.criterion = crit, c.point.step = static_cast<int>(step);
    c.point.heads_kept = ctx.total_heads - pruned;
    c.point.budget = std::to_string(c.point.heads_kept) + " heads";
    c.point.flops_kept = (stored->flops - fixed) / encoder;
    out.push_back(c);
  }
  return out;
}

// The budget search's candidate at `fraction`, point `step` of the budget curves (budget_schedule's index, or 100 +
// the percent for a refined point), as the budget curves chose and kept it (budget_step_choice): the recovered model
// (RUN_DIR/budget_recover/<step>/best) or the step model they saved. nullopt for a point not stored (100%, or below
// what one head costs); nothing is searched here.
std::optional<Candidate> budget_candidate(const RunContext& ctx, int step, double fraction) {
  const core::PruneConfig& P = ctx.cfg->prune;
  const bool recovered = (P.curve_recover_steps < 0 ? P.recover_steps : P.curve_recover_steps) > 0;
  const std::string curve = budget_line_name(recovered ? BudgetLine::kRecovered : BudgetLine::kTuned);
  const auto stored = ctx.store->load_point(curve, ctx.cfg->run.seed, step);
  if (fraction >= 1 || !stored) return std::nullopt;
  const std::string file = step_choice_file(ctx, step),
                    rerun = "; resume the run (--out " + ctx.store->dir() + ": the budget curves choose it again)";
  if (!fs::exists(file))
    throw InputError(file + " is missing (the budget curves' choice of this budget's step)" + rerun);
  const nlohmann::json choice = nlohmann::json::parse(core::read_file(file));
  const Step variant = parse_step(choice.at("variant").get<std::string>());
  const std::string dir =
      variant == Step::kRecovered ? budget_recover_dir(ctx, step) + "/best" : step_model_dir(ctx, step);
  if (!fs::exists(dir + "/config.json"))
    throw InputError(dir + " is missing (the frontier measures the model there); delete " + file +
                     (variant == Step::kRecovered
                          ? " and " + ctx.store->dir() + "/state/points/" + curve + "* (the recovery is trained again)"
                          : "") +
                     rerun);
  Candidate c{{}, "kwon-" + std::to_string(step), [&ctx, dir] { return core::load_bert(dir, ctx.load); }};
  c.point.method = PointMethod::kKwon, c.point.variant = step_name(variant), c.point.step = step;
  c.point.heads_kept = stored->kept, c.point.cost_s = choice.at("cost_s").get<double>();
  c.point.flops_kept = fraction, c.point.budget = percent(fraction) + " FLOPs";
  return c;
}

// The budget search at each point of prune.budget_schedule below 100%, then at each budget it was refined at
// (point 100 + the percent).
std::vector<Candidate> budget_candidates(const RunContext& ctx, const std::vector<int>& refined) {
  const core::PruneConfig& P = ctx.cfg->prune;
  std::vector<Candidate> out;
  auto add = [&](int step, double fraction) {
    if (auto c = budget_candidate(ctx, step, fraction)) out.push_back(std::move(*c));
  };
  for (size_t step = 0; step < P.budget_schedule.size(); ++step)
    add(static_cast<int>(step), P.budget_schedule[step] / 100.0);
  for (const int pct : refined) add(100 + pct, pct / 100.0);
  return out;
}

// The model folders of prune.frontier_models (a GPU-trained export, another run's model/), each loaded with the
// task's labels and measured like the run's own: its FLOPs kept counted from its config at the evaluation split's
// mean length. InputError naming a folder that is not a model of this task and vocabulary.
std::vector<Candidate> model_candidates(const RunContext& ctx) {
  std::vector<Candidate> out;
  const long S = std::max(1L, std::lround(ctx.objective->mean_length()));
  for (size_t i = 0; i < ctx.cfg->prune.frontier_models.size(); ++i) {
    const std::string dir = ctx.cfg->prune.frontier_models[i];
    const core::BertConfig c = core::read_bert_config(dir + "/config.json");  // checked in stage 1
    Candidate cand{{}, "model-" + std::to_string(i), [&ctx, dir] { return core::load_bert(dir, ctx.load); }};
    cand.point.method = PointMethod::kModel, cand.point.model = dir, cand.point.step = static_cast<int>(i);
    cand.point.heads_kept = c.total_heads();
    cand.point.flops_kept = eval::encoder_flops(c, S) / eval::encoder_flops(ctx.arch, S);
    cand.point.budget = percent(cand.point.flops_kept) + " FLOPs";
    cand.point.cost_s = train::train_seconds(fs::path(dir).parent_path().string());  // a prune run's model/: its run's
    out.push_back(cand);
  }
  return out;
}

// The control (prune.control), trained in RUN_DIR/control by stage 5 as long as the longest-trained candidate.
Candidate control_candidate(const RunContext& ctx) {
  const std::string dir = ctx.cfg->run.out_dir + "/" + kControlDir;
  Candidate control{{}, "control", [&ctx, dir] { return core::load_bert(dir + "/best", ctx.load); }};
  control.point.method = PointMethod::kControl, control.point.heads_kept = ctx.total_heads;
  control.point.budget = std::to_string(train::train_steps(dir)) + " steps";
  control.point.cost_s = train::train_seconds(dir);
  return control;
}

// ONNX Runtime's reference points (prune/frontier/frontier_timing.h: add_ort_rows) on the evaluation split, of what
// the objective exports (Objective::ort_source).
void add_ort_points(const RunContext& ctx, const core::Bert& base, long batch, long seq, Frontier& f) {
  const std::string dir = ctx.store->dir() + "/state/frontier/ort";
  const Objective& o = *ctx.objective;
  add_ort_rows(
      base, batch, seq, ctx.cfg->prune.frontier_time, ctx.total_heads, dir,
      [&](std::string* skipped) {
        const Objective::OrtSource src = o.ort_source(ctx.model_dir);
        return ort_reference(src.folder, src.rows, batch, seq, src.sentence, dir, skipped);
      },
      [&](const torch::Tensor& outputs) { return 100 * o.metric_of_outputs(outputs); }, f);
}

// The Hard-Concrete gates stage 5 trained to `fraction` of the encoder's FLOPs (CoFi) in
// RUN_DIR/frontier_gates/<percent>, slimmed by their mask.
Candidate gates_candidate(const RunContext& ctx, double fraction) {
  const long pct = std::lround(100 * fraction);
  const std::string dir = ctx.cfg->run.out_dir + "/" + frontier_gates_dir(pct);
  const auto tr = nlohmann::json::parse(core::read_file(dir + "/train_result.json"));
  const core::StructureMask keep = gated_mask(ctx, tr);
  Candidate c{{}, "gates-" + std::to_string(pct), [&ctx, dir, keep] {
                return slim_model(core::load_bert(dir + "/best", ctx.load), keep);
              }};
  c.point.method = PointMethod::kGates, c.point.step = static_cast<int>(pct);
  c.point.heads_kept = core::count_kept(keep.heads);
  c.point.flops_kept = tr.at("budget").at("kept").get<double>(), c.point.budget = percent(fraction) + " FLOPs";
  c.point.cost_s = tr.value("train_seconds", 0.0);
  return c;
}

// The chosen candidate's model of `f`, slimmed and in fp32 weights, into RUN_DIR/frontier_choice (choice.json last,
// naming the candidate): the model stage 7 exports is the model that was measured, never a rebuilt one. Kept on a
// resumed run whose choice is the same.
void save_choice(const RunContext& ctx, const Frontier& f, const std::vector<Candidate>& cands) {
  const FrontierPoint& p = f.points.at(static_cast<size_t>(f.chosen));
  const std::string dir = ctx.cfg->run.out_dir + "/" + kFrontierChoiceDir, marker = dir + "/choice.json";
  if (fs::exists(marker)) {
    const auto kept = nlohmann::json::parse(core::read_file(marker)).at("point");
    if (kept.at("method").get<PointMethod>() == p.method && kept.at("step") == p.step &&
        kept.at("criterion") == p.criterion)
      return;
  }
  const Candidate& c = candidate_of(cands, p);
  fs::remove_all(dir);
  core::save_bert(c.build(), dir, ctx.model_dir);
  core::write_file_atomic(marker, nlohmann::json{{"point", p}}.dump(2) + "\n");
}

// The frontier's opening for ctx's run: task, metric, splits, timing, D.
Frontier frontier_header(const RunContext& ctx) {
  const core::Config& cfg = *ctx.cfg;
  Frontier f;
  f.task = ctx.task->name, f.metric = ctx.objective->task().primary_metric, f.split = cfg.prune.eval_split;
  f.select_split = ctx.select_split;
  f.timing =
      "batch " + std::to_string(cfg.prune.latency_batch) + " x " + std::to_string(ctx.curves.latency_seq) + " tokens";
  f.max_drop = cfg.prune.max_drop;
  return f;
}

// How the frontier measures: the objective's primary metric on the evaluation split and the slice, timed at
// prune.latency_batch x latency_seq and at batch 1 x the evaluation split's mean length.
FrontierMeasure frontier_measure(const RunContext& ctx, const core::Bert& base) {
  const core::Config& cfg = *ctx.cfg;
  FrontierMeasure m;
  m.cfg = &cfg, m.stop = ctx.stop, m.tokenizer = &*ctx.tok;
  m.base = &base;
  m.objective = ctx.objective.get();
  const long batch = cfg.prune.latency_batch, seq = ctx.curves.latency_seq;
  m.timings = {{batch, seq}, {1, std::max(1L, std::lround(ctx.objective->mean_length()))}};
  m.dir = ctx.store->dir() + "/state/frontier";
  m.ort = [&ctx, &base, batch, seq](Frontier& f) { add_ort_points(ctx, base, batch, seq, f); };
  return m;
}

// Every candidate `plan` names, in the order measured: the unpruned model, the head criterion's points, the budget
// search's (schedule, then refined), prune.frontier_models, the gates, the control. ConfigError for a run that
// cannot measure a frontier.
std::vector<Candidate> candidates(const RunContext& ctx, const CurvesSummary& curves, const FrontierPlan& plan) {
  if (ctx.objective->size(Split::kSelect) == 0)
    throw ConfigError("prune.max_drop chooses on the selection slice, and " + ctx.task->name + " has no split '" +
                      ctx.select_split +
                      "' (train.eval_split); set prune.select_split to a labelled split other "
                      "than prune.eval_split");
  auto cands = head_candidates(ctx, curves);
  for (auto& c : budget_candidates(ctx, plan.refined)) cands.push_back(std::move(c));
  for (auto& c : model_candidates(ctx)) cands.push_back(std::move(c));
  for (const double fraction : plan.gates) cands.push_back(gates_candidate(ctx, fraction));
  if (plan.control) cands.push_back(control_candidate(ctx));
  return cands;
}

}  // namespace

void check_frontier_models(const core::PruneConfig& p, const core::BertConfig& arch, const std::string& model,
                           const core::LoadOptions& load) {
  for (size_t i = 0; i < p.frontier_models.size(); ++i) {
    const std::string& dir = p.frontier_models[i];
    const std::string key = "prune.frontier_models[" + std::to_string(i) + "] = " + dir;
    if (!fs::is_regular_file(dir + "/config.json"))
      throw InputError(key + ": no config.json there; name an exported model folder (a prune run's model/)");
    const core::BertConfig c = core::read_bert_config(dir + "/config.json");
    if (c.model_type != arch.model_type || c.vocab_size != arch.vocab_size ||
        c.num_hidden_layers > arch.num_hidden_layers || c.max_heads() > arch.max_heads())
      throw InputError(key + ": not a pruned copy of " + model + " (" + c.model_type + ", vocabulary " +
                       std::to_string(c.vocab_size) + ", " + std::to_string(c.num_hidden_layers) + " layers against " +
                       arch.model_type + ", " + std::to_string(arch.vocab_size) + ", " +
                       std::to_string(arch.num_hidden_layers) + "); name an export of this model");
    core::LoadOptions any_labels = load;
    any_labels.num_labels = 0, any_labels.new_classifier = false;  // the stored classifier read as it is
    core::LoadReport report;
    const core::Bert m = core::load_bert(dir, any_labels, &report);
    const std::string fix = "; name an export of a model fine-tuned for these labels (a prune run's model/)";
    if (report.classifier_initialized)
      throw InputError(key + ": has no classifier (a sentence-transformers folder or a bare encoder)" + fix);
    if (load.num_labels > 0 && m.config().num_labels != load.num_labels)
      throw InputError(key + ": its classifier has " + std::to_string(m.config().num_labels) +
                       " labels, the task needs " + std::to_string(load.num_labels) + fix);
  }
}

std::optional<Frontier> measure_candidates(const RunContext& ctx, const CurvesSummary& curves,
                                           const FrontierPlan& plan) {
  const auto cands = candidates(ctx, curves, plan);
  const core::Bert base = fp32_base(ctx);
  if (plan.refined.empty() && plan.gates.empty() && !plan.control)
    log_stage(5, "frontier",
              std::to_string(cands.size()) + " structures x " +
                  std::to_string(native_precisions(ctx.cfg->prune).size()) +
                  " precisions, each evaluated and timed at "
                  "batch " +
                  std::to_string(ctx.cfg->prune.latency_batch) + " x " + std::to_string(ctx.curves.latency_seq) +
                  " tokens against the unpruned fp32 model");
  Frontier f = frontier_header(ctx);
  if (!measure_all(frontier_measure(ctx, base), cands, f)) return std::nullopt;
  return f;
}

std::optional<Frontier> measure_frontier(const RunContext& ctx, CurvesSummary& curves, const FrontierPlan& plan) {
  const auto cands = candidates(ctx, curves, plan);
  const core::Bert base = fp32_base(ctx);
  auto f = run_frontier(frontier_measure(ctx, base), cands, frontier_header(ctx), curves.files);
  if (f && f->chosen >= 0) save_choice(ctx, *f, cands);
  return f;
}

core::Config chosen_config(const core::Config& cfg, const Frontier& f) {
  HP_CHECK(f.chosen >= 0, "chosen_config: no candidate was chosen");
  core::Config c = cfg;
  c.prune.max_drop = 0;
  c.run.precision = f.points.at(static_cast<size_t>(f.chosen)).precision;
  return c;
}

FinalChoice frontier_final_choice(const RunContext& ctx, const Frontier& f) {
  const FrontierPoint& p = f.points.at(static_cast<size_t>(f.chosen));
  FinalChoice c;
  HP_CHECK(p.method != PointMethod::kOnnxRuntime, "the frontier chose ONNX Runtime's point, never a candidate");
  c.method = p.method == PointMethod::kHeads ? ChoiceMethod::kCriterion
             : p.method == PointMethod::kKwon  ? ChoiceMethod::kKwon
             : p.method == PointMethod::kGates ? ChoiceMethod::kGates
             : p.method == PointMethod::kModel ? ChoiceMethod::kModel
                                               : ChoiceMethod::kUnpruned;
  c.criterion = p.criterion;
  c.model_dir = ctx.cfg->run.out_dir + "/" + kFrontierChoiceDir;
  c.slimmed = true;
  const core::BertConfig slim = core::read_bert_config(c.model_dir + "/config.json");
  for (int l = 0; l < slim.num_hidden_layers; ++l) {
    std::vector<bool> row(static_cast<size_t>(ctx.arch.num_attention_heads), false);
    for (int h : slim.kept_heads(l)) row[static_cast<size_t>(h)] = true;
    c.keep.push_back(row);
  }
  if (p.method == PointMethod::kUnpruned || p.method == PointMethod::kHeads) return c;
  BudgetSummary b;
  b.unit = "FLOPs";
  b.mean_length = ctx.objective->mean_length();
  const long S = std::max(1L, std::lround(b.mean_length));
  b.target = p.method == PointMethod::kGates ? p.step / 100.0 : p.flops_kept;  // gates: the budget they were trained to
  b.kept = eval::encoder_flops(slim, S) / eval::encoder_flops(ctx.arch, S);
  b.neurons_kept = slim.total_neurons(), b.neurons_total = ctx.arch.num_hidden_layers * ctx.arch.intermediate_size;
  if (slim.hidden_slimmed()) b.hidden_kept = slim.hidden_size, b.hidden_total = ctx.arch.hidden_size;
  if (slim.num_hidden_layers < ctx.arch.num_hidden_layers)
    b.layers_kept = slim.num_hidden_layers, b.layers_total = ctx.arch.num_hidden_layers;
  for (int l = 0; l < slim.num_hidden_layers; ++l)
    b.heads_per_layer.push_back(slim.heads_in_layer(l)), b.ffn_widths.push_back(slim.ffn_width(l));
  b.selected_step = p.variant;
  c.budget = b;
  return c;
}

}  // namespace hp::prune
