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

// The frontier's structures: the unpruned encoder and the search at each point of prune.budget_schedule below 100%,
// each the best of its steps on the selection pairs (prune/frontier/frontier_stage.h searched_candidate). nullopt
// when stopped.
std::optional<std::vector<Candidate>> frontier_candidates(const EmbedRun& r, RunContext& ctx, const MaskGradients& g) {
  const core::Bert& teacher = r.teacher->model;
  Candidate unpruned{{}, "unpruned", [&teacher] { return teacher; }};
  unpruned.point.method = PointMethod::kUnpruned;
  unpruned.point.heads_kept = teacher.config().total_heads();
  std::vector<Candidate> cands = {unpruned};
  const auto& schedule = r.cfg->prune.budget_schedule;
  for (size_t k = 0; k < schedule.size(); ++k) {
    auto c = searched_candidate(ctx, g, static_cast<int>(k), schedule[k] / 100.0);
    if (core::dist::stop_requested(r.stop)) return std::nullopt;
    if (c) cands.push_back(std::move(*c));
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
  m.refine = [&ctx, &g](int pct) { return searched_candidate(ctx, g, 100 + pct, pct / 100.0); };
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
int run_embedding_frontier(const EmbedRun& r, RunSummary& s) {
  const core::Config& cfg = *r.cfg;
  RunContext ctx;  // the stages' search, recovery and gates
  stage_context(r, ctx);
  const auto grads = budget_gradients(ctx);
  auto cands = grads ? frontier_candidates(r, ctx, *grads) : std::nullopt;
  if (!cands) return kInterruptedExit;
  core::Bert base = r.teacher->model;
  base.set_precision(core::Precision::kFp32);
  const FrontierMeasure m = embedding_measure(r, ctx, *grads, base);
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

// `model`, the choice of a budget's stage (slimmed to `keep`), scored on both pairs, its budget summarised as the
// stage wrote it, exported and timed. 0.
int finish_choice(const EmbedRun& r, const core::Bert& model, const core::StructureMask& keep,
                  const FinalChoice& choice, const json& unpruned, RunSummary& s) {
  const json scores = score(r, model);
  FinalSummary f;
  f.method = choice_method_name(choice.method);
  f.selected_step = choice.budget->selected_step;
  f.metrics = summary_metrics(scores);
  f.metrics_before_recovery = choice.metrics_before_recovery;
  f.reference = teacher_reference(unpruned, scores);
  f.budget = choice.budget;
  finish_one(r, model, keep, choice.budget->kept, f, s,
             f.method + (f.selected_step.empty() ? "" : ", " + f.selected_step));
  return 0;
}

// `--method gates --target-flops F`: stage 5's gates (CoFi's, on heads, FFN neurons and sublayers, towards the
// teacher's embeddings) in RUN_DIR/gates, the slimmed model exported. 0 when done, kInterruptedExit when stopped.
int run_gates(const EmbedRun& r, RunSummary& s, const json& unpruned) {
  RunContext ctx;
  stage_context(r, ctx);
  const auto choice = choose_heads(ctx, s.curves);
  if (!choice) return kInterruptedExit;
  const core::StructureMask keep{choice->keep, choice->neurons, choice->layers, choice->hidden};
  return finish_choice(r, slim_model(core::load_bert(choice->model_dir, {}), keep), keep, *choice, unpruned, s);
}

// `--target-flops F`: stages 3, 5 and 6 of a task's budget run over the stages' context — the mask gradients of the
// embedding probe, Kwon et al.'s search, rearrangement and mask tuning at F (RUN_DIR/search), the recovery
// (RUN_DIR/recover), the best of the four steps on the selection sentences by their mean cosine to the teacher's
// (RUN_DIR/best_step) — then exported. 0 when done, kInterruptedExit when stopped.
int run_search(const EmbedRun& r, RunSummary& s, const json& unpruned) {
  RunContext ctx;
  stage_context(r, ctx);
  const auto grads = budget_gradients(ctx);
  if (!grads) return kInterruptedExit;
  FinalChoice choice = choose_budget(ctx, *grads);
  if (!recover(ctx, choice)) return kInterruptedExit;
  take_best_step(ctx, *grads, choice);
  return finish_choice(r, core::load_bert(choice.model_dir, {}), {choice.keep, {}}, choice, unpruned, s);
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
  if (cfg.prune.max_drop > 0) return run_embedding_frontier(r, s);
  return run_search(r, s, unpruned);
}

}  // namespace hp::prune
