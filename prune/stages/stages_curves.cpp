// Stages 1-4 of the pruning run: prepare, fine-tune, score, curves (see prune/stages/stages.h).
#include <algorithm>
#include <filesystem>
#include <random>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/data/file_task.h"
#include "core/data/task_options.h"
#include "core/dist/distributed.h"
#include "core/kernels/device.h"  // parse_device, gpu_summary
#include "prune/heads/report.h"
#include "prune/heads/schedule.h"
#include "prune/stages/best_step.h"
#include "prune/stages/budget.h"
#include "prune/data/distill_data.h"  // check_distill_tasks, distill_rows
#include "prune/data/selection.h"
#include "prune/stages/stages.h"
#include "train/task_run.h"

namespace hp::prune {

namespace fs = std::filesystem;

void log_stage(int number, const std::string& name, const std::string& what) {
  core::log_info("prune", "stage " + std::to_string(number) + "/" + std::to_string(kStages) + " " + name + ": " + what);
}

namespace {

// The model, tokenizer, encoded data, ranking batches and curve inputs, from ctx.model_dir.
void load_model_and_data(RunContext& ctx) {
  const core::Config& cfg = *ctx.cfg;
  const core::PruneConfig& P = cfg.prune;
  ctx.model.emplace(core::load_bert(ctx.model_dir, ctx.load));
  ctx.tok.emplace(core::Tokenizer::from_model_dir(ctx.model_dir));
  ctx.eval_data = core::encode_examples(*ctx.tok, ctx.eval_examples, cfg.data.max_seq_len);
  core::BatchOptions bo;  // the evaluation split's and the selection slice's batches alike
  bo.batch_size = cfg.eval.batch_size;
  bo.pad_id = ctx.tok->pad_id();
  ctx.eval_batches = core::make_batches(ctx.eval_data, bo);
  if (!ctx.select_examples.empty()) {
    ctx.select_data = core::encode_examples(*ctx.tok, ctx.select_examples, cfg.data.max_seq_len);
    ctx.select_batches = core::make_batches(ctx.select_data, bo);
  }
  ctx.rank_sets.reserve(P.seeds);  // ranks point into rank_sets
  for (int s = 0; s < P.seeds; ++s)
    ctx.rank_sets.push_back(core::encode_examples(
        *ctx.tok, sample_examples(ctx.rank_examples, P.rank_examples, cfg.run.seed + s), cfg.data.max_seq_len));
  for (int s = 0; s < P.seeds; ++s)
    ctx.ranks.push_back(make_rank_data(*ctx.task, ctx.rank_sets[s], P.rank_batch_size, ctx.tok->pad_id()));

  CurveInputs& ci = ctx.curves;
  ci.model = &*ctx.model;
  const torch::Device device = core::parse_device(cfg.run.device);
  if (!device.is_cpu()) {  // the criteria score on the GPU (forward and backward there), their importances come back
    ctx.device_model.emplace(ctx.model->to(device));
    ci.score_model = &*ctx.device_model;
    core::log_info("prune", "the criteria score on " + device.str() + " (" + core::gpu_summary() + ")");
  }
  ci.precision = core::precision_setting(cfg.run.precision);
  ci.objective = ctx.objective.get();
  ci.opts = &P;
  ci.counts = schedule_counts(P.schedule, P.schedule_unit, ctx.total_heads);
  ci.latency_batch = P.latency_batch;
  ci.latency_seq = latency_seq(cfg);
  ci.stop = ctx.stop;
  // Where a best criterion is chosen among several (--target-heads N by best, the frontier's head candidates): every
  // point also scored on the selection slice, where it is chosen.
  const auto ranked = std::count_if(P.criteria.begin(), P.criteria.end(), [](const auto& c) { return c != "random"; });
  const bool best = P.max_drop > 0 || (P.target_heads > 0 && P.method == core::MethodKind::kBest);
  ci.select_too = best && ranked > 1 && !ctx.select_data.ids.empty();
}

}  // namespace

long latency_seq(const core::Config& cfg) {
  return cfg.prune.latency_seq > 0 ? cfg.prune.latency_seq : cfg.data.max_seq_len;
}

std::vector<core::Example> sample_examples(std::vector<core::Example> all, int n, int seed) {
  std::mt19937_64 gen(static_cast<uint64_t>(seed) * 1000003ULL + 11);
  for (size_t i = all.size(); i > 1; --i)
    std::swap(all[i - 1], all[std::uniform_int_distribution<size_t>(0, i - 1)(gen)]);
  if (n > 0 && static_cast<size_t>(n) < all.size()) all.resize(n);
  return all;
}

// A training run of the pruning run, in RUN_DIR/<sub> (resumed when its state is there) on the task
// and data resolved in stage 1. False when stopped.
bool train_in(const RunContext& ctx, const core::Config& cfg, const std::string& sub, const std::string& from,
              const core::HeadSet& fixed_keep, long finetune_steps, const std::string& teacher_dir) {
  TrainRequest r;
  r.cfg = &cfg, r.run_dir = ctx.cfg->run.out_dir + "/" + sub, r.from = from, r.fixed_keep = fixed_keep;
  r.teacher_dir = teacher_dir, r.finetune_steps = finetune_steps, r.stop = ctx.stop;
  return ctx.objective->train(r);
}

bool train_budget_gates(const RunContext& ctx, const core::Config& gates_cfg, const std::string& sub, int stage,
                        const std::string& name) {
  const std::string dir = ctx.cfg->run.out_dir + "/" + sub;
  if (fs::exists(dir + "/train_result.json")) return true;
  const core::GateConfig& g = gates_cfg.gates;
  const double target = g.target_flops + g.target_params;
  log_stage(stage, name,
            std::string("Hard-Concrete gates on heads, FFN neurons and sublayers") + (g.layer_gates ? ", layers" : "") +
                (g.hidden_gates ? ", hidden channels" : "") + " to " + std::to_string(std::lround(100 * target)) +
                "% of the encoder's " + (g.target_params > 0 ? "parameters" : "FLOPs") + ", in " + dir);
  return train_in(ctx, gates_cfg, sub, ctx.model_dir, {}, budget_recover_steps(gates_cfg.prune, target, false));
}

std::string frontier_gates_dir(long percent) { return "frontier_gates/" + std::to_string(percent); }

void prepare(RunContext& ctx, const core::Config& user, const std::atomic<bool>* stop) {
  ctx.stop = stop;
  ctx.task = &core::task_of(user.data, user.model.path);
  ctx.arch = core::read_bert_config(user.model.path + "/config.json");
  core::check_max_seq_len(ctx.arch, user.data.max_seq_len);
  ctx.total_heads = ctx.arch.total_heads();
  ctx.load = core::task_load_options(*ctx.task, user.run.seed);
  ctx.load.new_classifier = user.prune.new_classifier;
  // Read the data before claiming the output folder: a task without data fails with nothing written.
  check_split(*ctx.task, "prune.eval_split", user.prune.eval_split);
  check_split(*ctx.task, "prune.rank_split", user.prune.rank_split);
  ctx.data_root = core::data_root_for(user.data);
  // Where the run's choices are made (prune/data/selection.h): from here on every stage reads the resolved config.
  Selection sel = resolve_selection(user, *ctx.task, ctx.data_root);
  ctx.resolved = std::move(sel.cfg);
  if (user.prune.max_drop > 0 && !user.prune.frontier_criteria.empty()) {  // the frontier's head rankings
    ctx.resolved.prune.criteria = user.prune.frontier_criteria;
    core::log_info("prune", "--max-drop: heads ranked by prune.frontier_criteria = [" +
                                core::join_list(user.prune.frontier_criteria) +
                                "] (in place of prune.criteria; [] scores those instead)");
  }
  ctx.select_split = sel.split;
  ctx.cfg = &ctx.resolved;
  const core::Config& cfg = ctx.resolved;
  const core::PruneConfig& P = cfg.prune;
  ctx.eval_examples = core::read_task(*ctx.task, ctx.data_root, P.eval_split);
  ctx.rank_examples = core::read_task(*ctx.task, ctx.data_root, P.rank_split);
  if (ctx.eval_examples.empty() || !ctx.eval_examples.front().has_label)
    throw ConfigError("prune.eval_split = " + P.eval_split + " has no labels; use a labelled split (dev)");
  const auto names = ctx.task->split_names();
  if (std::count(names.begin(), names.end(), core::parse_split_spec(ctx.select_split).name))
    ctx.select_examples = core::read_task(*ctx.task, ctx.data_root, ctx.select_split);
  core::log_info("prune", sel.what);
  if (!P.distill_tasks.empty()) {  // the teacher's extra inputs, read before the folder is claimed
    check_distill_tasks(P.distill_tasks, ctx.task->name);
    std::string what;
    ctx.distill_rows = distill_rows(*ctx.task, P.distill_tasks, ctx.data_root, &what);
    core::log_info("prune", "prune.distill_tasks: " + what +
                                " unlabelled rows for the distilled trainings (none shares a text with " +
                                ctx.task->name + "'s splits)");
  }
  if (P.rank_split == P.eval_split)
    core::log_warn("prune", "prune.rank_split = eval_split = " + P.eval_split +
                                ": heads are ranked on the data the curves report");
  if (ctx.task->name == "mnli_subset")
    core::log_info("prune", "mnli_subset: our own split of TextFooler's MNLI dev subset (" + P.rank_split + " ranks, " +
                                P.eval_split + " evaluates); the full GLUE MNLI is not on this machine");

  // The task's objective reads the data stage 2 encodes (into ctx, which stays where it is).
  ctx.objective = make_task_objective({ctx.task, &ctx.eval_data, &ctx.select_data, &ctx.eval_batches,
                                       &ctx.select_batches, ctx.data_root, &ctx.distill_rows});
  prepare_latency_budget(ctx);  // measures, and refuses an unreachable target, before the folder is claimed

  ctx.store = std::make_unique<RunStore>(cfg.run.out_dir, core::resume_yaml(cfg));
  core::write_file_atomic(cfg.run.out_dir + "/config.resolved.yaml", core::dump_yaml(cfg));
  save_latency_table(ctx);
  log_stage(1, "prepare",
            ctx.task->name + ", " + std::to_string(ctx.total_heads) + " heads, run folder " + cfg.run.out_dir +
                (ctx.store->resumed() ? " (resuming)" : ""));
}

bool fine_tune(RunContext& ctx) {
  const core::Config& cfg = *ctx.cfg;
  core::LoadReport rep;
  try {
    core::load_bert(cfg.model.path, ctx.load, &rep);
  } catch (const CheckpointError& e) {  // a classifier of other labels: the config's to fix, nothing kept
    throw ConfigError(e.what());
  }
  ctx.model_dir = cfg.model.path;
  if (!rep.classifier_initialized) {
    log_stage(2, "fine-tune", cfg.model.path + " has a classifier for " + ctx.task->name + "'s " +
                                  std::to_string(ctx.task->num_labels()) + " label(s): pruned as it is, not fine-tuned");
  } else {
    if (!cfg.prune.finetune)
      throw ConfigError(cfg.model.path + " has no classifier for " + ctx.task->name +
                        "; set prune.finetune: true (fine-tune first) or point model.path at a fine-tuned model");
    const std::string dir = cfg.run.out_dir + "/finetune";
    ctx.model_dir = dir + "/best";
    if (!fs::exists(dir + "/train_result.json")) {
      log_stage(2, "fine-tune", cfg.model.path + " on " + ctx.task->name + " into " + dir);
      core::Config c = cfg;
      c.gates = core::GateConfig{};  // plain fine-tuning
      if (!train_in(ctx, c, "finetune", cfg.model.path)) return false;
    }
  }
  load_model_and_data(ctx);
  return true;
}

std::optional<std::map<std::string, torch::Tensor>> score(RunContext& ctx) {
  const core::Config& cfg = *ctx.cfg;
  log_stage(3, "score",
            std::to_string(cfg.prune.criteria.size()) + " criteria x " + std::to_string(cfg.prune.seeds) +
                " seeds on " + std::to_string(ctx.rank_sets[0].size()) + " " + cfg.prune.rank_split + " examples");
  std::map<std::string, torch::Tensor> importance;
  for (const auto& name : cfg.prune.criteria) {
    const Criterion& crit = find_criterion(name);
    for (int s = 0; s < cfg.prune.seeds; ++s) {
      if (core::dist::stop_requested(ctx.stop)) return std::nullopt;
      score_unpruned(ctx.curves, crit, cfg.run.seed + s, ctx.ranks[s], *ctx.store);
    }
    importance[name] = *ctx.store->load_importance(name, cfg.run.seed, 0);  // as every later reader sees it
  }
  return importance;
}

std::optional<CurvesSummary> curves(RunContext& ctx, const std::map<std::string, torch::Tensor>& importance) {
  const core::Config& cfg = *ctx.cfg;
  log_stage(4, "curves",
            std::to_string(ctx.curves.counts.size()) + " points per criterion and seed, on " +
                std::to_string(ctx.objective->size(Split::kEval)) + " " + cfg.prune.eval_split + " examples" +
                (ctx.curves.select_too ? " and " + ctx.select_split + "'s" : ""));
  CurveReport report;
  report.run_dir = cfg.run.out_dir;
  report.config_yaml = core::dump_yaml(cfg);
  report.task = &ctx.objective->task();
  report.total_heads = ctx.total_heads;
  report.importance = importance;
  for (const auto& name : cfg.prune.criteria) {
    for (int s = 0; s < cfg.prune.seeds; ++s) {
      if (core::dist::stop_requested(ctx.stop)) return std::nullopt;
      auto pts = run_curve(ctx.curves, find_criterion(name), cfg.run.seed + s, ctx.ranks[s], *ctx.store);
      if (core::dist::stop_requested(ctx.stop)) return std::nullopt;
      report.points.insert(report.points.end(), pts.begin(), pts.end());
    }
  }
  CurvesSummary out;
  report.aggregates = aggregate(report.points, *ctx.objective, cfg.prune.bootstrap, cfg.run.seed);
  out.files = write_curve_report(report);
  out.fractions = largest_fraction_within(report.aggregates, ctx.total_heads, 0.01);
  out.areas = curve_area(report.aggregates);
  const std::string& metric = ctx.objective->task().primary_metric;
  if (ctx.curves.select_too) out.select_areas = curve_area(report.aggregates, "select_" + metric);
  out.aggregates = std::move(report.aggregates);
  for (const auto& [c, f] : out.fractions)
    core::log_info("prune", c + ": prunes up to " + std::to_string(static_cast<int>(f * 100 + 0.5)) +
                                "% of heads within 1 point of " + metric + " (mean " + std::to_string(out.areas.at(c)) +
                                " over the schedule)");
  return out;
}

}  // namespace hp::prune
