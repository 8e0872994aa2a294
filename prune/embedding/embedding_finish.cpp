// The end of a pruning run for embeddings (see prune/embedding/embedding_finish.h).
#include "prune/embedding/embedding_finish.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/base/strings.h"
#include "core/io/checkpoint.h"
#include "eval/embedding.h"
#include "eval/latency.h"
#include "eval/flops.h"  // parameter_count
#include "prune/export/slim.h"
#include "prune/stages/stages.h"  // time_against

namespace hp::prune {

namespace fs = std::filesystem;
using json = nlohmann::json;

void log_step(int n, const std::string& what) {
  core::log_info("prune", "embedding stage " + std::to_string(n) + "/5: " + what);
}

std::string score_variants(const EmbedRun& r, const std::vector<std::pair<std::string, core::Bert>>& models,
                           const std::string& state, json& steps) {
  std::string chosen;
  for (const auto& [variant, model] : models) {
    const json& v = steps[variant] = cached(state, "step-" + variant, [&] { return score(r, model); });
    core::log_info("prune", variant + ": cosine Spearman " + core::format_number("%.2f", v["spearman"]) +
                                ", mean cosine to the teacher " +
                                core::format_number("%.4f", v["mean_cosine_to_teacher"]) +
                                " (selection: " + core::format_number("%.2f", v["select_spearman"]) + ", " +
                                core::format_number("%.4f", v["select_cosine_to_teacher"]) + ")");
    const double m = v["select_cosine_to_teacher"].get<double>();
    if (chosen.empty() || m >= steps[chosen]["select_cosine_to_teacher"].get<double>()) chosen = variant;
  }
  return chosen;
}

json export_choice(const EmbedRun& r, const core::Bert& model) {
  const core::Config& cfg = *r.cfg;
  const std::string out = cfg.run.out_dir + "/model";
  log_step(5, "export: " + out + " (a sentence-transformers folder), checked, timed");
  core::StagedFolder(out).write([&](const std::string& dir) {
    core::write_bert_files(model, dir, r.teacher->layout.transformer_dir, {false, cfg.export_.max_shard_mb, true});
    core::write_sentence_model_files(r.teacher->layout, model.config().hidden_size, dir);
  });
  const eval::SentenceEncoder back = eval::load_sentence_encoder(out);
  const eval::SentenceEncoder here{r.teacher->layout, model, r.teacher->tokenizer};
  const auto a = eval::evaluate_sts(back, r.eval_pairs, cfg.eval.batch_size, 0);
  const auto b = eval::evaluate_sts(here, r.eval_pairs, cfg.eval.batch_size, 0);
  const double diff = (a.embeddings - b.embeddings).abs().max().item<double>();
  if (diff > kReadBackTolerance)
    throw InternalError(out + ": the exported folder's embeddings differ from the model's by " +
                        core::format_number("%.3g", diff) + " (> " + tolerance_text(kReadBackTolerance) +
                        "); report it with the run's config");
  return {{"dir", out}, {"max_abs_embedding_diff", diff}};
}

RunSummary embedding_summary(const EmbedRun& r) {
  const core::Config& cfg = *r.cfg;
  RunSummary s;
  s.objective = core::choice_text(core::Objective::kEmbedding);
  s.task = cfg.data.task, s.model = cfg.model.path, s.finetuned_model = cfg.model.path;  // its own teacher
  s.metric = "cosine_spearman";
  s.eval_split = cfg.prune.eval_split, s.rank_split = cfg.prune.rank_split, s.select_split = r.select_split;
  s.precision = cfg.run.precision;
  s.heads_total = r.teacher->model.config().total_heads();
  s.rank_examples = static_cast<long>(r.search_set.size());
  return s;
}

std::map<std::string, double> summary_metrics(const json& v) {
  return {{"cosine_spearman", v.at("spearman").get<double>() / 100},
          {"cosine_pearson", v.at("pearson").get<double>() / 100},
          {"mean_cosine_to_teacher", v.at("mean_cosine_to_teacher").get<double>()},
          {"select_cosine_spearman", v.at("select_spearman").get<double>() / 100},
          {"select_cosine_to_teacher", v.at("select_cosine_to_teacher").get<double>()}};
}

ReferenceSummary teacher_reference(const json& unpruned, const json& scores) {
  ReferenceSummary ref;
  ref.unpruned = unpruned.at("spearman").get<double>();
  ref.unpruned_select = unpruned.at("select_spearman").get<double>();
  ref.delta = scores.at("spearman").get<double>() - ref.unpruned;
  ref.select_delta = scores.at("select_spearman").get<double>() - ref.unpruned_select;
  return ref;
}

void write_final(const EmbedRun& r, const core::Bert& model, FinalSummary f, RunSummary& s) {
  const core::Config& cfg = *r.cfg;
  f.slim_vs_masked_max_abs_logit_diff = export_choice(r, model)["max_abs_embedding_diff"].get<double>();
  core::Bert unpruned = r.teacher->model;  // the baseline at fp32, as a task's frontier times it
  unpruned.set_precision(core::Precision::kFp32);
  log_step(5, "speed: the export against the teacher at batch 1 and 32, " + std::to_string(timing_seq(cfg)) + " tokens");
  f.latency = time_against(unpruned, model, timing_seq(cfg));
  if (f.heads_kept == 0) f.heads_kept = model.config().total_heads();
  f.params = eval::parameter_count(model.config());
  f.params_unpruned = eval::parameter_count(r.teacher->model.config());
  s.final = f;
  s.files.push_back("model/");
  core::write_file_atomic(cfg.run.out_dir + "/summary.json", summary_json(s).dump(2) + "\n");
}

void finish_one(const EmbedRun& r, const core::Bert& model, const core::StructureMask& keep, double kept,
                FinalSummary f, RunSummary& s, const std::string& what) {
  const core::Config& cfg = *r.cfg;
  f.heads_kept = static_cast<int>(core::count_kept(keep.heads));
  f.mask = core::format_mask(keep);
  write_final(r, model, f, s);
  const ReferenceSummary& ref = *s.final->reference;
  const LatencySummary& l = s.final->latency.at("batch32");
  std::printf(
      "%s %s cosine Spearman: %s, %.0f%% of the encoder's %s: %.2f (unpruned %.2f, %+.2f); speedup x%.2f at "
      "batch 32 x %ld (FLOP bound x%.2f); sentence-transformers folder in %s/model\n",
      cfg.data.task.c_str(), cfg.prune.eval_split.c_str(), what.c_str(), 100 * kept,
      (f.budget ? f.budget->unit : std::string("FLOPs")).c_str(), ref.unpruned + ref.delta,
      ref.unpruned, ref.delta, l.speedup, l.seq, l.flop_bound, cfg.run.out_dir.c_str());
}

}  // namespace hp::prune
