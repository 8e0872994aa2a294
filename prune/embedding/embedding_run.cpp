// The pruning run for sentence-embedding models (see prune/embedding/embedding_run.h).
#include "prune/embedding/embedding_run.h"

#include <filesystem>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/strings.h"
#include "core/data/glue.h"
#include "core/dist/distributed.h"
#include "core/io/checkpoint.h"
#include "eval/embedding.h"
#include "prune/data/distill_data.h"
#include "prune/embedding/embedding_context.h"
#include "prune/stages/stages.h"

namespace hp::prune {

namespace fs = std::filesystem;

namespace {

// ConfigError for what --target-heads does not take for embeddings (a gates criterion, more than one seed).
void validate_heads(const core::Config& cfg) {
  const core::PruneConfig& p = cfg.prune;
  for (const auto& c : p.criteria)
    if (find_criterion(c).reads_gated_run)
      throw ConfigError("prune.objective = embedding: prune.criteria has " + c +
                        ", which reads a classifier's gated run; "
                        "leave it out (--method gates --target-flops F trains the gates for embeddings)");
  if (p.seeds != 1 || p.iterative || p.rank_split != "train")
    throw ConfigError(
        "prune.objective = embedding: --target-heads ranks the heads once, with one seed, on the training "
        "sentences the run distils: leave prune.seeds 1, prune.iterative false and prune.rank_split train");
  const bool taylor = std::count(p.criteria.begin(), p.criteria.end(), "taylor") ||
                      (p.method == core::MethodKind::kCriterion && p.method.criterion == "taylor");
  if (taylor && p.taylor_token_level)
    throw ConfigError(
        "prune.objective = embedding: prune.taylor_token_level is a classifier's loss per token; an "
        "embedding's Taylor reads the whole embedding's derivative: set it false");
  if (p.method == core::MethodKind::kBest || p.method == core::MethodKind::kKwon) return;
  if (p.method == core::MethodKind::kCriterion) find_criterion(p.method.criterion, "prune.method");
  if (p.method == core::MethodKind::kGates)
    throw ConfigError(
        "prune.objective = embedding: --method gates trains to a FLOPs budget, not to a head count; "
        "pass --target-flops F with it, or a criterion (--method taylor) with --target-heads N");
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
  if (p.target_heads > 0) validate_heads(cfg);
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

void prepare_embedding(EmbedRun& r, RunContext& ctx, const core::Config& cfg, const std::atomic<bool>* stop) {
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
  log_stage(1, "prepare",
            cfg.model.path + " (sentence-transformers), run folder " + cfg.run.out_dir +
                (r.store->resumed() ? " (resuming)" : ""));
  r.objective = make_embedding_objective({&core::find_task(cfg.data.task), &*r.teacher, r.pooling, &r.eval_pairs,
                                          &r.select_pairs, cfg.eval.batch_size, static_cast<uint64_t>(cfg.run.seed),
                                          &r.sentences, &r.eval_sentences, r.teacher->layout.transformer_dir});
  stage_context(r, ctx);
}

}  // namespace hp::prune
