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
#include "prune/export/slim.h"

namespace hp::prune {

namespace fs = std::filesystem;
using json = nlohmann::json;

void log_step(int n, const std::string& what) {
  core::log_info("prune", "embedding stage " + std::to_string(n) + "/5: " + what);
}

json recovery_result(const BudgetDirs& dirs) {
  const std::string file = dirs.recovered + "/train_result.json";
  return fs::exists(file) ? json::parse(core::read_file(file)) : json();
}

std::string score_variants(const EmbedRun& r, const std::vector<std::pair<std::string, core::Bert>>& models,
                           const std::string& state, const TeacherEmbeddings& te, json& steps) {
  std::string chosen;
  for (const auto& [variant, model] : models) {
    const eval::SentenceEncoder enc{r.teacher->layout, model, r.teacher->tokenizer};
    const json& v = steps[variant] = cached(state, "step-" + variant, [&] { return score(r, enc, te); });
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
  if (diff > 1e-5)
    throw InternalError(out + ": the exported folder's embeddings differ from the model's by " +
                        core::format_number("%.3g", diff) + " (> 1e-5); report it with the run's config");
  return {{"dir", out}, {"max_abs_embedding_diff", diff}};
}

json speed(const EmbedRun& r, const core::Bert& slim) {
  const core::Config& cfg = *r.cfg;
  const long seq = timing_seq(cfg);
  const auto in = eval::synthetic_input(slim.config(), cfg.prune.latency_batch, seq, 7);
  std::vector<double> base, ours;
  for (int round = 0; round < 3; ++round) {
    base.push_back(eval::measure_latency(r.teacher->model, in, 1, 3, 0.5).median_ms);
    ours.push_back(eval::measure_latency(slim, in, 1, 3, 0.5).median_ms);
  }
  std::sort(base.begin(), base.end()), std::sort(ours.begin(), ours.end());
  return {{"batch", cfg.prune.latency_batch},
          {"seq", seq},
          {"unpruned_ms", base[1]},
          {"pruned_ms", ours[1]},
          {"speedup", base[1] / ours[1]}};
}

void finish_one(const EmbedRun& r, const core::Bert& model, const json& final, const std::string& what, json& summary) {
  const core::Config& cfg = *r.cfg;
  summary["export"] = export_choice(r, model);
  summary["latency"] = speed(r, model);
  summary["final"] = final;
  core::write_file_atomic(cfg.run.out_dir + "/summary.json", summary.dump(2) + "\n");
  const double sp = final["spearman"].get<double>(), base = summary["unpruned"]["spearman"].get<double>();
  const json& kept = summary["structure"];
  std::printf(
      "%s %s cosine Spearman: %s, %.0f%% of the encoder's %s: %.2f (unpruned %.2f, %+.2f); speedup x%.2f at "
      "batch %ld x %ld; sentence-transformers folder in %s/model\n",
      cfg.data.task.c_str(), cfg.prune.eval_split.c_str(), what.c_str(), 100 * kept["flops_kept"].get<double>(),
      summary["budget"]["unit"].get<std::string>().c_str(), sp, base, sp - base,
      summary["latency"]["speedup"].get<double>(), summary["latency"]["batch"].get<long>(),
      summary["latency"]["seq"].get<long>(), cfg.run.out_dir.c_str());
}

}  // namespace hp::prune
