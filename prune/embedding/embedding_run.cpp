// The pruning run for sentence-embedding models (see prune/embedding/embedding_run.h).
#include "prune/embedding/embedding_run.h"

#include <algorithm>
#include <chrono>
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
#include "core/io/tensor_io.h"
#include "core/model/pooling.h"
#include "eval/embedding.h"
#include "eval/evaluator.h"
#include "eval/latency.h"
#include "prune/stages/best_step.h"
#include "prune/stages/budget.h"
#include "prune/embedding/embedding_context.h"
#include "prune/data/distill_data.h"
#include "prune/embedding/embedding_finish.h"
#include "prune/embedding/embedding_gates.h"
#include "prune/embedding/embedding_heads.h"
#include "prune/record/frontier.h"
#include "prune/frontier/frontier_timing.h"
#include "prune/search/mask_search.h"
#include "prune/search/mask_tuning.h"
#include "core/plot/plot.h"
#include "prune/record/run_store.h"
#include "prune/data/selection.h"
#include "prune/export/slim.h"
#include "prune/stages/stages.h"
#include "train/embedding_objective.h"

namespace hp::prune {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

double seconds_from(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

MaskGradients embedding_gradients(const EmbedRun& r) {
  const std::string path = r.state + "/mask_gradients.h5";
  if (!fs::exists(path)) {
    log_step(2, "mask gradients of the embedding probe on " + std::to_string(r.search_set.size()) + " sentences");
    const train::Pooling pool = r.pooling;
    const uint64_t seed = static_cast<uint64_t>(r.cfg->run.seed);
    const MaskLoss probe = [&pool, seed](const core::EncoderOutput& out, const core::Batch& b, long i) {
      const auto e = core::pool_sentences(pool.modes, pool.normalize, out.last_hidden,
                                          b.attention_mask.to(out.last_hidden.device()));
      return train::embedding_probe(e, seed * 1000003ULL + static_cast<uint64_t>(i));
    };
    core::Progress progress("gradients", static_cast<long>(r.search.batches.size()), "batches");
    const auto t = std::chrono::steady_clock::now();
    const auto g = mask_gradients(r.teacher->model, r.search, [&](long d, long) { progress.update(d); }, false,
                                  false, probe);
    progress.finish();
    core::write_hdf5(path, {{"heads", g.heads}, {"neurons", g.neurons}},
                     {{"seconds", std::to_string(seconds_from(t))}});
  }
  const auto t = core::read_hdf5(path);
  return {t.at("heads").to(torch::kFloat64), t.at("neurons").to(torch::kFloat64)};
}

struct Searched {
  StructureKeep searched, rearranged;
  MaskScales scales;
  double flops_kept = 0;
  BudgetUnit unit;
};

Searched search(const EmbedRun& r, const MaskGradients& g, const core::PruneConfig& p) {
  const core::Bert& teacher = r.teacher->model;
  const core::BertConfig& arch = teacher.config();
  core::EncodedDataset eval_singles = core::encode_examples(
      r.teacher->tokenizer, single_sentences(r.eval_pairs), eval::embedding_length(*r.teacher, 0));
  Searched s;
  s.unit = budget_unit(p, arch, core::mean_length(eval_singles));
  const double target = s.unit.target;
  log_step(3, "Kwon et al.'s search to " + std::to_string(std::lround(100 * target)) + "% of the encoder's " +
                  s.unit.name + " (at " + core::format_number("%.1f", s.unit.mean_length) +
                  " tokens, the evaluation sentences' mean), rearranged" + (p.mask_tuning ? ", mask-tuned" : ""));
  s.searched = search_structures(fisher_importances(g), s.unit.costs, s.unit.budget(target), Prunable{}, {},
                                 layer_counts(arch.num_hidden_layers, p.layer_counts));
  s.rearranged = p.rearrange ? rearrange(s.searched, g) : s.searched;
  TuningOptions opts;
  opts.damping = p.tuning_damping;
  // The pooling reads every position unless it is [CLS] alone: the last layer is fitted where it is read.
  const auto& modes = r.pooling.modes.modes;
  opts.cls_last_layer = modes.size() == 1 && modes[0] == core::PoolingMode::kCls;
  s.scales = p.mask_tuning ? tune_masks(teacher, s.rearranged, r.search, opts) : unit_scales(s.rearranged);
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
                                    const BudgetDirs& dirs, const TeacherEmbeddings& te) {
  const core::Bert& teacher = r.teacher->model;
  BudgetRun b;
  b.s = search(r, g, p);
  b.models.emplace_back("searched", slim_model(teacher, b.s.searched));
  b.models.emplace_back("rearranged", slim_model(teacher, b.s.rearranged));
  b.models.emplace_back("tuned", slim_model(fold_scales(teacher, b.s.scales), b.s.rearranged));
  fs::create_directories(dirs.state);
  if (auto rec = recovered_model(r, b.models.back().second, p, b.s.unit.target, dirs))
    b.models.emplace_back("recovered", *rec);
  if (core::dist::stop_requested(r.stop)) return std::nullopt;
  b.chosen = score_variants(r, b.models, dirs.state, te, b.steps);
  return b;
}

// The seconds of training that made a budget's model (its recovery; 0 without one).
double budget_cost(const BudgetDirs& dirs) {
  const std::string file = dirs.state + "/recovery.json";
  return fs::exists(file) ? json::parse(core::read_file(file)).value("seconds", 0.0) : 0.0;
}

}  // namespace

namespace {

// Where a budget of the frontier keeps its work: RUN_DIR/state/embedding/budget-P and RUN_DIR/budgets/P/recovered.
BudgetDirs frontier_dirs(const EmbedRun& r, int percent) {
  return {r.state + "/budget-" + std::to_string(percent),
          r.cfg->run.out_dir + "/budgets/" + std::to_string(percent) + "/recovered"};
}

// One structure at one precision (RUN_DIR/state/embedding/frontier/KEY-PRECISION.json once measured): the cosine
// Spearman on the evaluation and the selection pairs (points) with the selection pairs' similarities (for the
// interval), the speedup over the unpruned fp32 encoder.
FrontierPoint measure_point(const EmbedRun& r, const core::Bert& base, const core::Bert& slim, FrontierPoint p,
                            core::Precision precision, const std::string& key, const TeacherEmbeddings& te) {
  const core::Config& cfg = *r.cfg;
  p.precision = core::precision_name(precision);
  const std::string file = r.state + "/frontier/" + key + "-" + p.precision + ".json";
  if (fs::exists(file))
    if (auto stored = read_point(file)) return *stored;
  eval::SentenceEncoder enc{r.teacher->layout, slim, r.teacher->tokenizer};
  enc.model.set_precision(precision);
  eval::calibrate_int8(enc.model, cfg, enc.tokenizer);  // int8 only
  const int eval_batch = cfg.eval.batch_size;
  eval::StsResult on_slice = eval::evaluate_sts(enc, r.select_pairs, eval_batch, 0);
  const json sc = scores_of(on_slice, eval::evaluate_sts(enc, r.eval_pairs, eval_batch, 0), te);
  p.metric = sc["spearman"].get<double>(), p.select_metric = sc["select_spearman"].get<double>();
  p.select_predictions = std::move(on_slice.similarities);
  const long batch = cfg.prune.latency_batch, seq = timing_seq(cfg);
  p.speedup = p.speedups[timing_key(batch, seq)] =
      speedup_against(base, enc.model, batch, seq, frontier_label(p), cfg.prune.frontier_time);
  write_point(file, p);
  return p;
}

// Each point's difference on the selection pairs with its 90% interval, from the similarities each point kept (the
// cosine Spearman is the primary metric of the similarities against the gold scores).
void add_slice_intervals(const EmbedRun& r, Frontier& f) {
  std::vector<float> gold;
  for (const auto& e : r.select_pairs) gold.push_back(e.label);
  add_select_deltas(f, core::find_task(r.cfg->data.task), gold, r.cfg->prune.bootstrap,
                    static_cast<unsigned long long>(r.cfg->run.seed));
}

using Candidates = std::vector<std::tuple<FrontierPoint, std::string, core::Bert>>;  // point, key, slimmed model

// The search at `pct` percent of the encoder's FLOPs (its best step, as a --target-flops run chooses it) appended to
// `cands`, its steps into `budgets`. False when stopped.
bool add_budget(const EmbedRun& r, const MaskGradients& g, const TeacherEmbeddings& te, int pct, json& budgets,
                Candidates& cands) {
  core::PruneConfig p = r.cfg->prune;
  p.target_flops = pct / 100.0, p.target_params = 0;
  const BudgetDirs dirs = frontier_dirs(r, pct);
  core::log_info("prune", "frontier: the search at " + std::to_string(pct) + "% of the encoder's FLOPs");
  auto b = run_budget(r, g, p, dirs, te);
  if (!b) return false;
  FrontierPoint fp;
  fp.method = "kwon", fp.budget = std::to_string(pct) + "% FLOPs", fp.step = pct, fp.variant = b->chosen;
  const json st = structure_json(b->s.rearranged, b->s.flops_kept);
  fp.heads_kept = st["heads_kept"].get<int>(), fp.flops_kept = b->s.flops_kept, fp.cost_s = budget_cost(dirs);
  budgets[std::to_string(pct)] = {{"steps", b->steps}, {"chosen", b->chosen}, {"structure", st}};
  cands.emplace_back(fp, "kwon-" + std::to_string(pct), b->choice());
  return true;
}

// The frontier's structures: the unpruned encoder and the search at each point of prune.budget_schedule. nullopt when
// stopped.
std::optional<Candidates> frontier_candidates(const EmbedRun& r, const MaskGradients& g, const TeacherEmbeddings& te,
                                              json& budgets) {
  Candidates cands;
  FrontierPoint unpruned;
  unpruned.method = "unpruned",
  unpruned.heads_kept = r.teacher->model.config().num_hidden_layers * r.teacher->model.config().num_attention_heads;
  cands.emplace_back(unpruned, "unpruned", r.teacher->model);
  for (const int pct : r.cfg->prune.budget_schedule)
    if (pct > 0 && pct < 100 && !add_budget(r, g, te, pct, budgets, cands)) return std::nullopt;
  return cands;
}

// Candidates [from, end) measured at every native precision into `f`; false when stopped.
bool measure_candidates(const EmbedRun& r, const core::Bert& base, const TeacherEmbeddings& te, const Candidates& cands,
                        size_t from, Frontier& f) {
  const auto precisions = native_precisions(r.cfg->prune);
  core::Progress progress("frontier", static_cast<long>((cands.size() - from) * precisions.size()), "candidates");
  long done = 0;
  for (size_t i = from; i < cands.size(); ++i)
    for (const auto precision : precisions) {
      if (core::dist::stop_requested(r.stop)) return false;
      const auto& [point, key, model] = cands[i];
      add_measured(f, measure_point(r, base, model, point, precision, key, te));
      const FrontierPoint& m = f.points.back();
      progress.update(++done, frontier_label(m) + ": " + core::format_number("%.2f", m.metric) + ", x" +
                                  core::format_number("%.2f", m.speedup));
    }
  progress.finish();
  return true;
}

// The gates (prune/embedding/embedding_gates.h) at the budgets prune.frontier_gates names — [auto]: the cheapest the search left
// within 2·D on the selection pairs — each trained once in RUN_DIR/frontier_gates/PERCENT; false when stopped.
bool add_gates(const EmbedRun& r, const TeacherEmbeddings& te, const Frontier& f, Candidates& cands) {
  for (const double fraction : frontier_gate_budgets(r.cfg->prune.frontier_gates, f)) {
    const int pct = static_cast<int>(std::lround(100 * fraction));
    const auto g = gated_embedding(r, te, fraction, r.cfg->run.out_dir + "/frontier_gates/" + std::to_string(pct));
    if (!g) return false;
    FrontierPoint fp;
    fp.method = "gates", fp.budget = std::to_string(pct) + "% FLOPs", fp.step = pct;
    fp.heads_kept = static_cast<int>(core::count_kept(g->keep.heads)), fp.flops_kept = g->flops_kept;
    fp.cost_s = g->seconds;
    cands.emplace_back(fp, "gates-" + std::to_string(pct), g->slim);
  }
  return true;
}

// `prune --config sts_embed.yaml --max-drop D`: every candidate (frontier_candidates) at every native precision; the
// fastest within D points of cosine Spearman on the selection pairs exported. 0 when done, kInterruptedExit when stopped.
int run_frontier(const EmbedRun& r, const MaskGradients& g, const TeacherEmbeddings& te, json summary) {
  const core::Config& cfg = *r.cfg;
  fs::create_directories(r.state + "/frontier");
  json budgets = json::object();
  auto found = frontier_candidates(r, g, te, budgets);
  if (!found) return kInterruptedExit;
  Candidates& cands = *found;
  core::Bert base = r.teacher->model;
  base.set_precision(core::Precision::kFp32);
  Frontier f;
  f.task = cfg.data.task, f.metric = "cosine_spearman", f.split = cfg.prune.eval_split, f.select_split = r.select_split;
  f.timing = "batch " + std::to_string(cfg.prune.latency_batch) + " x " + std::to_string(timing_seq(cfg)) + " tokens";
  f.max_drop = cfg.prune.max_drop;
  if (!measure_candidates(r, base, te, cands, 0, f)) return kInterruptedExit;
  // prune.frontier_refine: the search again halfway between the deepest budget within D and the next deeper one.
  for (int round = 0; round < cfg.prune.frontier_refine; ++round) {
    const auto pct = refine_budget(f, kRefineGapPercent);
    if (!pct) break;
    const size_t from = cands.size();
    core::log_info("prune", "frontier: the search refined at " + std::to_string(*pct) + "% of the FLOPs (round " +
                                std::to_string(round + 1) + " of " + std::to_string(cfg.prune.frontier_refine) +
                                "): between the deepest budget within D on the selection pairs and the next "
                                "deeper one");
    if (!add_budget(r, g, te, *pct, budgets, cands) || !measure_candidates(r, base, te, cands, from, f)) return kInterruptedExit;
  }
  const size_t searched = cands.size();
  if (!add_gates(r, te, f, cands) || !measure_candidates(r, base, te, cands, searched, f)) return kInterruptedExit;
  const long batch = cfg.prune.latency_batch, seq = timing_seq(cfg);
  const std::string ort_dir = r.state + "/frontier/ort";
  add_ort_rows(
      base, batch, seq, cfg.prune.frontier_time, std::get<0>(cands.front()).heads_kept, ort_dir,
      [&](std::string* skipped) {
        const auto texts = eval::encode_texts(*r.teacher, eval::sts_texts(r.eval_pairs), 0);
        return ort_reference(cfg.model.path, texts, batch, seq, true, ort_dir, skipped);
      },
      [&](const torch::Tensor& e) {
        return 100 * eval::sts_of_embeddings(r.eval_pairs, e).metrics.at("cosine_spearman");
      },
      f);
  add_slice_intervals(r, f);
  const auto chosen = choose(f);
  f.chosen = chosen ? static_cast<int>(*chosen) : -1;
  core::write_file_atomic(cfg.run.out_dir + "/frontier.csv", frontier_csv(f));
  for (const auto& [name, chart] :
       {std::pair{"frontier", frontier_chart(f)}, {"frontier_cost", frontier_cost_chart(f)}})
    core::write_svg_and_png(cfg.run.out_dir + "/" + name + ".svg", core::svg_line_chart(chart));
  summary["frontier"] = f, summary["budgets"] = budgets;
  if (!chosen) {
    core::write_file_atomic(cfg.run.out_dir + "/summary.json", summary.dump(2) + "\n");
    throw ConfigError(no_choice_message(f, "cosine Spearman", cfg.run.out_dir));
  }
  const FrontierPoint& c = f.points[*chosen];
  const auto& model = std::get<2>(*std::find_if(cands.begin(), cands.end(), [&](const auto& k) {
    return std::get<0>(k).method == c.method && std::get<0>(k).step == c.step;
  }));
  core::log_info("prune", "frontier: chose " + frontier_label(c) + (c.variant.empty() ? "" : " (" + c.variant + ")") +
                              ": cosine Spearman " + core::format_number("%.2f", c.select_metric) + " on " +
                              f.select_split + " (unpruned " + core::format_number("%.2f", f.select_baseline) + "), " +
                              core::format_number("%.2f", c.metric) + " on " + f.split + ", x" +
                              core::format_number("%.2f", c.speedup));
  if (const std::string risk = unresolved_choice(c, f); !risk.empty()) core::log_warn("frontier", risk);
  summary["export"] = export_choice(r, model);
  summary["export"]["precision"] = c.precision;  // the folder holds fp32 weights: `prune embed --precision` runs it
  summary["final"] = {{"spearman", c.metric}, {"select_spearman", c.select_metric}, {"precision", c.precision},
                      {"method", c.method},   {"candidate", frontier_label(c)},     {"variant", c.variant},
                      {"speedup", c.speedup}, {"heads_kept", c.heads_kept},         {"flops_kept", c.flops_kept}};
  core::write_file_atomic(cfg.run.out_dir + "/summary.json", summary.dump(2) + "\n");
  std::printf(
      "%s %s cosine Spearman: %s (chosen within %g on %s): %.2f (unpruned %.2f, %+.2f); speedup x%.2f at %s; "
      "sentence-transformers folder in %s/model (run it at %s)\n",
      cfg.data.task.c_str(), f.split.c_str(), frontier_label(c).c_str(), f.max_drop, f.select_split.c_str(), c.metric,
      f.baseline, c.metric - f.baseline, c.speedup, f.timing.c_str(), cfg.run.out_dir.c_str(), c.precision.c_str());
  return 0;
}

}  // namespace

namespace {

// `--method gates --target-flops F`: the gates (prune/embedding/embedding_gates.h) in RUN_DIR/gates, the slimmed model scored
// and exported. 0 when done, kInterruptedExit when stopped.
int run_gates(const EmbedRun& r, const TeacherEmbeddings& te, json summary) {
  const core::Config& cfg = *r.cfg;
  const auto g = gated_embedding(r, te, cfg.prune.target_flops, cfg.run.out_dir + "/gates");
  if (!g) return kInterruptedExit;
  const eval::SentenceEncoder enc{r.teacher->layout, g->slim, r.teacher->tokenizer};
  const json scores = cached(r.state, "gates", [&] { return score(r, enc, te); });
  summary["gates"] = g->result;
  summary["budget"] = {{"unit", "FLOPs"}, {"target", cfg.prune.target_flops}};
  summary["structure"] = structure_json(g->keep, g->flops_kept);
  finish_one(r, g->slim, scores, "gates", summary);
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
  // The teacher embedded once: its own scores and what every step is compared with.
  const auto teacher_select = eval::evaluate_sts(*r.teacher, r.select_pairs, cfg.eval.batch_size, 0);
  const auto teacher_eval = eval::evaluate_sts(*r.teacher, r.eval_pairs, cfg.eval.batch_size, 0);
  const TeacherEmbeddings teacher_embeddings{teacher_select.embeddings, teacher_eval.embeddings};
  const json unpruned = cached(r.state, "unpruned", [&] { return scores_of(teacher_select, teacher_eval, {}); });
  core::log_info("prune", "unpruned: cosine Spearman " + core::format_number("%.2f", unpruned["spearman"]) + " on " +
                              cfg.prune.eval_split + ", " +
                              core::format_number("%.2f", unpruned["select_spearman"]) + " on " + r.select_split);
  if (core::dist::stop_requested(stop)) return kInterruptedExit;
  json summary = {{"objective", "embedding"},
                  {"model", cfg.model.path},
                  {"task", cfg.data.task},
                  {"select_split", r.select_split},
                  {"eval_split", cfg.prune.eval_split},
                  {"metric", "cosine_spearman"},
                  {"unpruned", unpruned}};
  if (cfg.prune.method == core::MethodKind::kGates) return run_gates(r, teacher_embeddings, summary);
  if (cfg.prune.target_heads > 0) return run_embedding_heads(r, teacher_embeddings, summary);
  const MaskGradients g = embedding_gradients(r);
  if (core::dist::stop_requested(stop)) return kInterruptedExit;
  if (cfg.prune.max_drop > 0) return run_frontier(r, g, teacher_embeddings, summary);
  const BudgetDirs dirs{r.state, cfg.run.out_dir + "/recovered"};
  const auto b = run_budget(r, g, cfg.prune, dirs, teacher_embeddings);
  if (!b) return kInterruptedExit;
  const Searched& s = b->s;
  summary["steps"] = b->steps, summary["chosen"] = b->chosen;
  summary["budget"] = {{"unit", s.unit.name}, {"target", s.unit.target}, {"mean_length", s.unit.mean_length}};
  summary["structure"] = structure_json(s.rearranged, s.flops_kept);
  if (fs::exists(r.state + "/recovery.json"))
    summary["recovery"] = json::parse(core::read_file(r.state + "/recovery.json"));
  finish_one(r, b->choice(), b->steps[b->chosen], "kwon, " + b->chosen, summary);
  return 0;
}

}  // namespace hp::prune
