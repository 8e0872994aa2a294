// What every step of the pruning run for embeddings reads (see prune/embedding/embedding_context.h).
#include "prune/embedding/embedding_context.h"

#include <algorithm>
#include <set>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/data/glue.h"
#include "prune/data/distill_data.h"
#include "prune/stages/stages.h"  // sample_examples
#include "prune/data/selection.h"
#include "prune/heads/schedule.h"

namespace hp::prune {

void read_data(EmbedRun& r, const core::Config& user) {
  const core::TaskSpec& task = core::find_task(user.data.task);
  const std::string root = core::resolve_data_root(user.data.root);
  Selection sel = resolve_selection(user, task, root);
  r.select_split = sel.split;
  const core::Config& cfg = *r.cfg;
  r.select_pairs = core::read_task(task, root, sel.split);
  r.eval_pairs = core::read_task(task, root, cfg.prune.eval_split);
  if (r.select_pairs.empty() || r.eval_pairs.empty())
    throw ConfigError("prune.objective = embedding: the selection slice " + sel.split + " or prune.eval_split " +
                      cfg.prune.eval_split + " of " + task.name + " has no pairs; use a labelled split (dev)");
  std::set<std::string> held;  // never distilled on: the selection's and the evaluation's sentences
  for (const auto* pairs : {&r.select_pairs, &r.eval_pairs})
    for (const auto& e : single_sentences(*pairs)) held.insert(e.text_a);
  std::string extra;
  const auto singles = distill_sentences(single_sentences(core::read_task(task, root, sel.cfg.train.train_split)),
                                         cfg.prune.distill_tasks, root, held, cfg.run.seed, &extra);
  r.sentences = eval::encode_sentences(*r.teacher, singles, 0);
  r.eval_sentences = eval::encode_sentences(*r.teacher, single_sentences(r.eval_pairs), 0);
  for (const auto& e : singles) r.distilled += e.text_a + "\n";
  const auto searched = sample_examples(singles, cfg.prune.search_examples, cfg.run.seed);
  r.search_set = eval::encode_sentences(*r.teacher, searched, 0);
  for (const auto& e : searched) r.search_texts.push_back(e.text_a);
  core::log_info("prune", "embedding: " + std::to_string(r.sentences.size()) + " sentences of " + task.name + " " +
                              sel.cfg.train.train_split + extra + " to distil on (" +
                              std::to_string(r.search_set.size()) + " of them for the search); choices on " +
                              std::to_string(r.select_pairs.size()) + " pairs of " + sel.split + ", reported on " +
                              std::to_string(r.eval_pairs.size()) + " pairs of " + cfg.prune.eval_split);
}

void stage_context(const EmbedRun& r, RunContext& ctx) {
  const core::Config& cfg = *r.cfg;
  const core::PruneConfig& p = cfg.prune;
  ctx.cfg = r.cfg, ctx.stop = r.stop, ctx.store = r.store, ctx.objective = r.objective;
  ctx.select_split = r.select_split, ctx.task = &core::find_task(cfg.data.task);
  ctx.model.emplace(r.teacher->model), ctx.tok.emplace(r.teacher->tokenizer);
  ctx.model_dir = r.teacher->layout.transformer_dir;
  ctx.arch = r.teacher->model.config(), ctx.total_heads = ctx.arch.total_heads();
  const size_t n = p.rank_examples > 0 ? std::min<size_t>(p.rank_examples, r.search_set.size()) : r.search_set.size();
  core::EncodedDataset& rank = ctx.rank_sets.emplace_back(r.search_set);
  rank.ids.resize(n), rank.type_ids.resize(n);
  if (rank.labels.size() > n) rank.labels.resize(n);
  ctx.ranks.push_back(make_rank_data(*ctx.task, rank, p.rank_batch_size, ctx.tok->pad_id()));
  std::string text;  // which sentences scored the heads, for a reader (and tests/embed/heads_embedding.py)
  for (size_t i = 0; i < n; ++i) text += r.search_texts[i] + "\n";
  core::write_file_atomic(r.state + "/rank_sentences.txt", text);
  ctx.search_set = r.search_set;  // the budget search's sample: the sentences distilled on
  ctx.search = make_rank_data(*ctx.task, ctx.search_set, p.rank_batch_size, ctx.tok->pad_id());
  CurveInputs& in = ctx.curves;
  in.model = &*ctx.model, in.objective = ctx.objective.get(), in.select_too = true, in.opts = &p, in.stop = r.stop;
  in.counts = schedule_counts(p.schedule, p.schedule_unit, ctx.total_heads);
  in.latency_batch = p.latency_batch, in.latency_seq = latency_seq(cfg);
}

}  // namespace hp::prune
