// The pruning run for sentence-embedding models (see prune/embedding/embedding_run.h).
#include "prune/embedding/embedding_run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/base/strings.h"
#include "core/data/batching.h"
#include "core/data/glue.h"
#include "core/dist/distributed.h"
#include "core/io/checkpoint.h"
#include "core/model/pooling.h"
#include "eval/embedding.h"
#include "eval/evaluator.h"
#include "eval/latency.h"
#include "prune/stages/best_step.h"
#include "prune/stages/budget.h"
#include "prune/embedding/embedding_context.h"
#include "prune/data/distill_data.h"
#include "prune/embedding/embedding_finish.h"
#include "prune/embedding/embedding_heads.h"
#include "prune/record/frontier.h"
#include "prune/frontier/frontier_stage.h"
#include "prune/frontier/frontier_timing.h"
#include "prune/frontier/measure.h"
#include "prune/search/mask_search.h"
#include "prune/search/mask_tuning.h"
#include "core/plot/plot.h"
#include "prune/record/run_store.h"
#include "prune/data/selection.h"
#include "prune/export/slim.h"
#include "prune/stages/stages.h"
#include "train/embedding_objective.h"
#include "train/task_run.h"  // train_seconds

namespace hp::prune {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The mask gradients of the embedding probe (train/embedding_objective.h) on the search sentences, stored once.
MaskGradients embedding_gradients(const EmbedRun& r) {
  const train::Pooling pool = r.pooling;
  const uint64_t seed = static_cast<uint64_t>(r.cfg->run.seed);
  const MaskLoss probe = [&pool, seed](const core::EncoderOutput& out, const core::Batch& b, long i) {
    const auto e = core::pool_sentences(pool.modes, pool.normalize, out.last_hidden,
                                        b.attention_mask.to(out.last_hidden.device()));
    return train::embedding_probe(e, seed * 1000003ULL + static_cast<uint64_t>(i));
  };
  return *stored_mask_gradients(r.state + "/mask_gradients.h5", r.teacher->model, r.search, false, false, probe, [&] {
    log_step(2, "mask gradients of the embedding probe on " + std::to_string(r.search_set.size()) + " sentences");
    return true;
  });
}

// The searched model `tuned` recovered in `dir` for budget_recover_steps(p, target) steps (`target`: the fraction of
// the FLOPs kept) of distillation to the teacher's embeddings (the objective's training; the same-depth layer term
// when prune.distill_hidden > 0): DIR/best, read back once trained. nullopt without steps or when stopped.
std::optional<core::Bert> recovered_model(const EmbedRun& r, const core::Bert& tuned, const core::PruneConfig& p,
                                          double target, const std::string& dir) {
  const long steps = budget_recover_steps(p, target, false);
  if (steps <= 0) return std::nullopt;
  if (!fs::exists(dir + "/train_result.json")) {
    log_step(4, "recovery: " + std::to_string(steps) + " steps of distillation to the teacher's embeddings" +
                    (p.distill_hidden > 0
                         ? " and, weighted " + core::format_number("%g", p.distill_hidden) + ", its layers' outputs"
                         : "") +
                    ", in " + dir);
    core::Config c = recovery_config(*r.cfg, static_cast<int>(steps), true);
    c.prune = p;
    core::Bert student = copy_model(tuned);  // the tuned model is scored as it was: training gives its tensors grad
    TrainRequest req;
    req.cfg = &c, req.run_dir = dir, req.start = &student, req.stop = r.stop;
    if (!r.objective->train(req)) return std::nullopt;
  }
  return core::load_bert(dir + "/best", core::LoadOptions{});
}

struct Searched {
  StructureKeep searched, rearranged;
  MaskScales scales;
  double flops_kept = 0;
  BudgetUnit unit;
};

Searched search(const EmbedRun& r, const MaskGradients& g, const core::PruneConfig& p) {
  const core::Bert& teacher = r.teacher->model;
  Searched s;
  s.unit = budget_unit(p, teacher.config(), r.objective->mean_length());
  const double target = s.unit.target;
  log_step(3, "Kwon et al.'s search to " + std::to_string(std::lround(100 * target)) + "% of the encoder's " +
                  s.unit.name + " (at " + core::format_number("%.1f", s.unit.mean_length) +
                  " tokens, the evaluation sentences' mean), rearranged" + (p.mask_tuning ? ", mask-tuned" : ""));
  // The pooling reads every position unless it is [CLS] alone: the last layer is fitted where it is read.
  const auto& modes = r.pooling.modes.modes;
  const BudgetSearch b = search_structure(p, teacher, r.search, g, s.unit, target,
                                          modes.size() == 1 && modes[0] == core::PoolingMode::kCls);
  s.searched = b.searched, s.rearranged = b.rearranged, s.scales = b.scales;
  s.flops_kept = core::structure_cost(s.rearranged, s.unit.costs) / s.unit.total;
  return s;
}

}  // namespace

void validate_embedding_run(const core::Config& cfg) {
  const core::PruneConfig& p = cfg.prune;
  auto refuse = [](bool bad, const std::string& why) {
    if (bad) throw ConfigError("prune.objective = embedding: " + why);
  };
  refuse(!core::is_sentence_model(cfg.model.path),
         cfg.model.path + " has no modules.json, so it is no sentence-transformers folder; point model.path at one "
                          "(checkpoints/all-MiniLM-L6-v2), or use prune.objective: task for a classifier");
  refuse(cfg.data.task != "stsb", "data.task = " + cfg.data.task +
                                      "; the embeddings are scored on STS-B pairs (cosine Spearman, as MTEB does): "
                                      "use data.task: stsb (configs/sts_embed.yaml)");
  refuse(p.max_drop > 0 && (p.target_flops > 0 || p.target_params > 0),
         "--max-drop chooses the budget itself (prune.budget_schedule); pass it or --target-flops F, not both");
  refuse(cfg.gates.distill_augment > 0,
         "gates.distill_augment = " + core::format_number("%g", cfg.gates.distill_augment) +
             " swaps words in a task's distillation; the embeddings' recovery distils the unpruned model's "
             "embeddings of unlabelled sentences (add more with prune.distill_tasks): set it to 0");
  refuse(!p.frontier_models.empty(),
         "prune.frontier_models is not measured for embeddings (the frontier measures "
         "the search at prune.budget_schedule); leave it []");
  refuse(!(p.max_drop > 0) && !(p.target_flops > 0) && !(p.target_params > 0) && p.target_heads <= 0,
         "no budget; pass --target-flops F or --target-params F (e.g. --target-flops 0.5), --target-heads N, or "
         "--max-drop D");
  refuse(p.target_heads > 0 && (p.max_drop > 0 || p.target_flops > 0 || p.target_params > 0),
         "--target-heads N keeps N heads by a criterion; pass it alone, not with --max-drop, --target-flops or "
         "--target-params");
  refuse(
      p.target_layers > 0 || p.target_latency > 0,
      "--target-layers and --target-latency are not built for embeddings; pass --target-flops F or --target-heads N");
  if (p.target_heads > 0) validate_embedding_heads(cfg);
  else
    refuse(p.method == core::MethodKind::kCriterion,
           "prune.method = " + core::choice_text(p.method) +
               "; a budget for embeddings is reached by the search (kwon) or by the gates (gates); a criterion "
               "chooses heads with --target-heads N");
  refuse(p.method == core::MethodKind::kGates && !(p.target_flops > 0),
         "--method gates trains to a FLOPs budget: pass --target-flops F (--max-drop measures the search's budgets; "
         "--target-params is not built for the gates on embeddings)");
  refuse(cfg.gates.layer_gates || cfg.gates.hidden_gates,
         "gates.layer_gates and gates.hidden_gates remove whole layers and hidden channels, which an embedding keeps "
         "(its export has every layer and the hidden width): set both false");
  for (const auto& s : p.structures)
    refuse(s != "heads" && s != "neurons",
           "prune.structures has " + s + "; embeddings are pruned over heads and FFN neurons only (--structures "
                                         "heads,neurons)");
  refuse(core::dist::world() > 1, "data parallelism is not built for embeddings; run one process");
  check_distill_tasks(p.distill_tasks, cfg.data.task);
}

namespace {

// One budget: the search's four models, each scored (STATE/step-VARIANT.json); the choice the closest to the teacher
// on the selection sentences (what the model is pruned for, on held-out data; the Spearman of a few hundred pairs
// scatters by a point or two); a later step wins a tie.
struct BudgetRun {
  Searched s;
  std::vector<std::pair<std::string, core::Bert>> models;
  json steps = json::object();
  std::string chosen;
  const core::Bert& choice() const {
    return std::find_if(models.begin(), models.end(), [&](const auto& m) { return m.first == chosen; })->second;
  }
};

// nullopt when stopped.
std::optional<BudgetRun> run_budget(const EmbedRun& r, const MaskGradients& g, const core::PruneConfig& p,
                                    const BudgetDirs& dirs) {
  const core::Bert& teacher = r.teacher->model;
  BudgetRun b;
  b.s = search(r, g, p);
  b.models.emplace_back("searched", slim_model(teacher, b.s.searched));
  b.models.emplace_back("rearranged", slim_model(teacher, b.s.rearranged));
  b.models.emplace_back("tuned", slim_model(fold_scales(teacher, b.s.scales), b.s.rearranged));
  fs::create_directories(dirs.state);
  if (auto rec = recovered_model(r, b.models.back().second, p, b.s.unit.target, dirs.recovered))
    b.models.emplace_back("recovered", *rec);
  if (core::dist::stop_requested(r.stop)) return std::nullopt;
  b.chosen = score_variants(r, b.models, dirs.state, b.steps);
  return b;
}

// The seconds of training that made a budget's model (its recovery; 0 without one).
double budget_cost(const BudgetDirs& dirs) { return train::train_seconds(dirs.recovered); }

}  // namespace

namespace {

// Where a budget of the frontier keeps its work: RUN_DIR/state/embedding/budget-P and RUN_DIR/budgets/P/recover.
BudgetDirs frontier_dirs(const EmbedRun& r, int percent) {
  return {r.state + "/budget-" + std::to_string(percent),
          r.cfg->run.out_dir + "/budgets/" + std::to_string(percent) + "/recover"};
}

// The search at `pct` percent of the encoder's FLOPs (its best step, as a --target-flops run chooses it), its steps
// scored in RUN_DIR/state/embedding/budget-P. nullopt when stopped.
std::optional<Candidate> budget_candidate(const EmbedRun& r, const MaskGradients& g, int pct) {
  core::PruneConfig p = r.cfg->prune;
  p.target_flops = pct / 100.0, p.target_params = 0;
  const BudgetDirs dirs = frontier_dirs(r, pct);
  core::log_info("prune", "frontier: the search at " + std::to_string(pct) + "% of the encoder's FLOPs");
  auto b = run_budget(r, g, p, dirs);
  if (!b) return std::nullopt;
  Candidate c{{}, "kwon-" + std::to_string(pct), [model = b->choice()] { return model; }};
  c.point.method = PointMethod::kKwon, c.point.budget = std::to_string(pct) + "% FLOPs", c.point.step = pct;
  c.point.variant = b->chosen;
  c.point.heads_kept = core::count_kept(b->s.rearranged.heads), c.point.flops_kept = b->s.flops_kept;
  c.point.cost_s = budget_cost(dirs);
  return c;
}

// The frontier's structures: the unpruned encoder and the search at each point of prune.budget_schedule. nullopt when
// stopped.
std::optional<std::vector<Candidate>> frontier_candidates(const EmbedRun& r, const MaskGradients& g) {
  const core::Bert& teacher = r.teacher->model;
  Candidate unpruned{{}, "unpruned", [&teacher] { return teacher; }};
  unpruned.point.method = PointMethod::kUnpruned;
  unpruned.point.heads_kept = teacher.config().num_hidden_layers * teacher.config().num_attention_heads;
  std::vector<Candidate> cands = {unpruned};
  for (const int pct : r.cfg->prune.budget_schedule) {
    if (pct <= 0 || pct >= 100) continue;
    auto c = budget_candidate(r, g, pct);
    if (!c) return std::nullopt;
    cands.push_back(std::move(*c));
  }
  return cands;
}

// How the embeddings' frontier measures: the cosine Spearman of the selection and the evaluation pairs, the
// selection pairs' similarities for the intervals, timed at prune.latency_batch x timing_seq; refined by the search.
FrontierMeasure embedding_measure(const EmbedRun& r, RunContext& ctx, const MaskGradients& g, const core::Bert& base) {
  const core::Config& cfg = *r.cfg;
  FrontierMeasure m;
  m.cfg = &cfg, m.stop = r.stop, m.tokenizer = &r.teacher->tokenizer;
  m.base = &base;
  m.objective = r.objective.get();
  const long batch = cfg.prune.latency_batch, seq = timing_seq(cfg);
  m.timings = {{batch, seq}};
  m.dir = r.state + "/frontier";
  m.refine = [&r, &g](int pct) { return budget_candidate(r, g, pct); };
  m.gates = [&ctx](double fraction) { return gates_candidate(ctx, fraction); };
  m.ort = [&r, &base, batch, seq](Frontier& f) {
    const std::string ort_dir = r.state + "/frontier/ort";
    add_ort_rows(
        base, batch, seq, r.cfg->prune.frontier_time, base.config().total_heads(), ort_dir,
        [&](std::string* skipped) {
          const auto texts = eval::encode_texts(*r.teacher, eval::sts_texts(r.eval_pairs), 0);
          return ort_reference(r.cfg->model.path, texts, batch, seq, true, ort_dir, skipped);
        },
        [&](const torch::Tensor& e) {
          return 100 * eval::sts_of_embeddings(r.eval_pairs, e).metrics.at("cosine_spearman");
        },
        f);
  };
  return m;
}

// `prune --config sts_embed.yaml --max-drop D`: every candidate (frontier_candidates) at every native precision; the
// fastest within D points of cosine Spearman on the selection pairs exported. 0 when done, kInterruptedExit when
// stopped.
int run_embedding_frontier(const EmbedRun& r, const MaskGradients& g, RunSummary& s, const json& unpruned) {
  const core::Config& cfg = *r.cfg;
  auto cands = frontier_candidates(r, g);
  if (!cands) return kInterruptedExit;
  core::Bert base = r.teacher->model;
  base.set_precision(core::Precision::kFp32);
  RunContext ctx;  // the stages' gates
  stage_context(r, ctx);
  const FrontierMeasure m = embedding_measure(r, ctx, g, base);
  Frontier header;
  header.task = cfg.data.task, header.metric = s.metric, header.split = cfg.prune.eval_split;
  header.select_split = r.select_split;
  header.timing =
      "batch " + std::to_string(cfg.prune.latency_batch) + " x " + std::to_string(timing_seq(cfg)) + " tokens";
  header.max_drop = cfg.prune.max_drop;
  const auto found = run_frontier(m, *cands, header, s.files);
  if (!found) return kInterruptedExit;
  const Frontier& f = *(s.frontier = *found);
  if (f.chosen < 0) {
    core::write_file_atomic(cfg.run.out_dir + "/summary.json", summary_json(s).dump(2) + "\n");
    throw ConfigError(no_choice_message(f, "cosine Spearman", cfg.run.out_dir));
  }
  const FrontierPoint& c = f.points[static_cast<size_t>(f.chosen)];
  core::Bert model = candidate_of(*cands, c).build();
  core::log_info("prune", "frontier: chose " + frontier_label(c) + (c.variant.empty() ? "" : " (" + c.variant + ")") +
                              ": cosine Spearman " + core::format_number("%.2f", c.select_metric) + " on " +
                              f.select_split + " (unpruned " + core::format_number("%.2f", f.select_baseline) + "), " +
                              core::format_number("%.2f", c.metric) + " on " + f.split + ", x" +
                              core::format_number("%.2f", c.speedup));
  if (const std::string risk = unresolved_choice(c, f); !risk.empty()) core::log_warn("frontier", risk);
  FinalSummary fin;
  fin.method = point_method_name(c.method);
  fin.criterion = c.criterion;
  fin.selected_step = c.variant;
  fin.heads_kept = c.heads_kept;
  fin.metrics = {{"cosine_spearman", c.metric / 100}, {"select_cosine_spearman", c.select_metric / 100}};
  fin.reference = ReferenceSummary{f.reference, f.unpruned_metric, f.unpruned_select, 0, 0, 0,
                                   c.metric - f.baseline, c.select_delta};
  s.precision = c.precision;  // the folder holds fp32 weights: `prune embed --precision` runs it as chosen
  model.set_precision(core::precision_setting(c.precision));
  write_final(r, model, fin, s);
  std::printf(
      "%s %s cosine Spearman: %s (chosen within %g on %s): %.2f (unpruned %.2f, %+.2f); speedup x%.2f at %s; "
      "sentence-transformers folder in %s/model (run it at %s)\n",
      cfg.data.task.c_str(), f.split.c_str(), frontier_label(c).c_str(), f.max_drop, f.select_split.c_str(), c.metric,
      f.baseline, c.metric - f.baseline, c.speedup, f.timing.c_str(), cfg.run.out_dir.c_str(), c.precision.c_str());
  return 0;
}

}  // namespace

namespace {

// `--method gates --target-flops F`: stage 5's gates (CoFi's, on heads, FFN neurons and sublayers, towards the
// teacher's embeddings) in RUN_DIR/gates, the slimmed model scored and exported. 0 when done, kInterruptedExit when
// stopped.
int run_gates(const EmbedRun& r, RunSummary& s, const json& unpruned) {
  RunContext ctx;
  stage_context(r, ctx);
  const auto choice = choose_heads(ctx, s.curves);
  if (!choice) return kInterruptedExit;
  const core::StructureMask keep{choice->keep, choice->neurons, choice->layers, choice->hidden};
  const core::Bert slim = slim_model(core::load_bert(choice->model_dir, {}), keep);
  const json scores = cached(r.state, kGatesDir, [&] { return score(r, slim); });
  FinalSummary f;
  f.method = choice_method_name(ChoiceMethod::kGates);
  f.metrics = summary_metrics(scores);
  f.reference = teacher_reference(unpruned, scores);
  f.budget = choice->budget;
  finish_one(r, slim, keep, choice->budget->kept, f, s, f.method);
  return 0;
}

}  // namespace

namespace {

// `--target-flops F`: stages 3, 5 and 6 of a task's budget run over the stages' context — the mask gradients of the
// embedding probe, Kwon et al.'s search, rearrangement and mask tuning at F (RUN_DIR/search), the recovery
// (RUN_DIR/recover), the best of the four steps on the selection sentences by their mean cosine to the teacher's
// (RUN_DIR/best_step) — then scored and exported. 0 when done, kInterruptedExit when stopped.
int run_search(const EmbedRun& r, RunSummary& s, const json& unpruned) {
  RunContext ctx;
  stage_context(r, ctx);
  const auto grads = budget_gradients(ctx);
  if (!grads) return kInterruptedExit;
  FinalChoice choice = choose_budget(ctx, *grads);
  if (!recover(ctx, choice)) return kInterruptedExit;
  take_best_step(ctx, *grads, choice);
  const core::Bert model = core::load_bert(choice.model_dir, {});
  const json scores = score(r, model);
  FinalSummary f;
  f.method = choice_method_name(ChoiceMethod::kKwon);
  f.selected_step = choice.budget->selected_step;
  f.metrics = summary_metrics(scores);
  f.metrics_before_recovery = choice.metrics_before_recovery;
  f.reference = teacher_reference(unpruned, scores);
  f.budget = choice.budget;
  finish_one(r, model, {choice.keep, {}}, choice.budget->kept, f, s, "kwon, " + f.selected_step);
  return 0;
}

}  // namespace

int run_embedding_pruning(const core::Config& cfg, const std::atomic<bool>* stop) {
  EmbedRun r;
  r.cfg = &cfg, r.stop = stop;
  core::LoadOptions load;
  load.seed = cfg.run.seed;
  r.teacher.emplace(eval::load_sentence_encoder(cfg.model.path, load));
  r.pooling = {r.teacher->layout.pooling, r.teacher->layout.normalize};
  read_data(r, cfg);  // before the folder is claimed: a task without data fails with nothing written
  r.store = std::make_unique<RunStore>(cfg.run.out_dir, core::resume_yaml(cfg));
  core::write_file_atomic(cfg.run.out_dir + "/config.resolved.yaml", core::dump_yaml(cfg));
  r.state = cfg.run.out_dir + "/state/embedding";
  fs::create_directories(r.state);
  core::write_file_atomic(r.state + "/distill_sentences.txt", r.distilled);  // what bench/st_layerdrop.py distils on
  log_step(1, "prepare: " + cfg.model.path + " (sentence-transformers), run folder " + cfg.run.out_dir +
                  (r.store->resumed() ? " (resuming)" : ""));
  r.objective = make_embedding_objective({&core::find_task(cfg.data.task), &*r.teacher, r.pooling, &r.eval_pairs,
                                          &r.select_pairs, cfg.eval.batch_size, static_cast<uint64_t>(cfg.run.seed),
                                          &r.sentences, &r.eval_sentences, r.teacher->layout.transformer_dir});
  const json unpruned = cached(r.state, "unpruned", [&] { return score(r, r.teacher->model); });
  core::log_info("prune", "unpruned: cosine Spearman " + core::format_number("%.2f", unpruned["spearman"]) + " on " +
                              cfg.prune.eval_split + ", " +
                              core::format_number("%.2f", unpruned["select_spearman"]) + " on " + r.select_split);
  if (core::dist::stop_requested(stop)) return kInterruptedExit;
  RunSummary s = embedding_summary(r);
  if (cfg.prune.method == core::MethodKind::kGates) return run_gates(r, s, unpruned);
  if (cfg.prune.target_heads > 0) return run_embedding_heads(r, s, unpruned);
  if (cfg.prune.max_drop > 0) {
    const MaskGradients g = embedding_gradients(r);
    if (core::dist::stop_requested(stop)) return kInterruptedExit;
    return run_embedding_frontier(r, g, s, unpruned);
  }
  return run_search(r, s, unpruned);
}

}  // namespace hp::prune
