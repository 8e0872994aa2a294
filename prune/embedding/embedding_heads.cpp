// `--target-heads N` and the criteria's curves for a sentence-embedding model (see prune/embedding/embedding_heads.h).
#include "prune/embedding/embedding_heads.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/base/strings.h"
#include "core/dist/distributed.h"
#include "eval/flops.h"
#include "prune/heads/curves.h"  // to_matrix, Aggregate
#include "prune/heads/report.h"  // write_curve_report
#include "prune/data/distill_data.h"
#include "prune/embedding/embedding_finish.h"
#include "prune/embedding/embedding_train.h"
#include "core/plot/plot.h"
#include "prune/heads/schedule.h"
#include "prune/export/slim.h"

namespace hp::prune {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The first prune.rank_examples (0: all) of the search's sentences, in batches of prune.rank_batch_size; their text in
// STATE/rank_sentences.txt.
struct RankSet {
  core::EncodedDataset data;
  RankData rank;
};

void make_rank_set(const EmbedRun& r, RankSet& s) {
  const core::PruneConfig& p = r.cfg->prune;
  const size_t n = p.rank_examples > 0 ? std::min<size_t>(p.rank_examples, r.search_set.size()) : r.search_set.size();
  s.data = r.search_set;
  s.data.ids.resize(n), s.data.type_ids.resize(n);
  if (s.data.labels.size() > n) s.data.labels.resize(n);
  s.rank = make_rank_data(*r.search.task, s.data, p.rank_batch_size, r.teacher->tokenizer.pad_id());
  std::string text;  // which sentences scored the heads, for a reader (and tests/embed/heads_embedding.py)
  for (size_t i = 0; i < n; ++i) text += r.search_texts[i] + "\n";
  core::write_file_atomic(r.state + "/rank_sentences.txt", text);
}

// The heads `crit`'s ranking keeps after removing `pruned`.
core::HeadSet heads_after(const EmbedRun& r, const torch::Tensor& importance, int pruned) {
  const core::PruneConfig& p = r.cfg->prune;
  const core::HeadSet all = all_heads(r.teacher->model.config());
  return prune_to(to_matrix(importance), all, pruned, RankOptions{p.per_layer, p.min_heads_per_layer});
}

// What one head and one FFN neuron cost at the evaluation sentences' mean length, and the whole encoder.
struct Costs {
  core::UnitCosts unit;
  double total = 0;
};

Costs head_costs(const EmbedRun& r) {
  const core::BertConfig& arch = r.teacher->model.config();
  Costs c;
  c.unit = eval::unit_costs(arch, false, r.objective->mean_length());
  c.total = eval::total_cost(arch, c.unit);
  return c;
}

// The structure that keeps `heads` and every FFN neuron, and its FLOPs fraction.
struct HeadsModel {
  core::StructureMask keep;
  double flops_kept = 1;
};

HeadsModel heads_model(const EmbedRun& r, const core::HeadSet& heads, const Costs& costs) {
  const core::BertConfig& arch = r.teacher->model.config();
  HeadsModel m;
  m.keep.heads = heads;
  for (int l = 0; l < arch.num_hidden_layers; ++l) m.keep.neurons.emplace_back(arch.ffn_width(l), true);
  m.flops_kept = core::structure_cost(m.keep, costs.unit) / costs.total;
  return m;
}

struct Curves {
  CurvesSummary summary;
  std::map<std::string, torch::Tensor> importance;
  std::string best;
};

// Every criterion's importance and curve, scored and evaluated as a task's are (prune/heads/curves.h) through the
// embedding objective, each point on the evaluation and the selection pairs, and written as a task's curves are
// (prune/heads/report.h). The best criterion: the highest mean Spearman on the selection pairs over its curve, random
// passed over beside others.
std::optional<Curves> run_curves(const EmbedRun& r, const RankData& rank) {
  const core::Config& cfg = *r.cfg;
  const int total = r.teacher->model.config().total_heads();
  CurveInputs in;
  in.model = &r.teacher->model, in.objective = r.objective.get(), in.select_too = true, in.opts = &cfg.prune;
  in.counts = schedule_counts(cfg.prune.schedule, cfg.prune.schedule_unit, total);
  in.latency_batch = cfg.prune.latency_batch, in.latency_seq = timing_seq(cfg), in.stop = r.stop;
  log_step(2,
           std::to_string(cfg.prune.criteria.size()) + " criteria on " + std::to_string(rank.data->size()) +
               " training sentences, the embedding's loss or target for each (prune/heads/criteria.h); their curves: " +
               std::to_string(in.counts.size()) + " points each, scored on the selection and evaluation pairs");
  Curves c;
  CurveReport report{cfg.run.out_dir, core::dump_yaml(cfg), &r.objective->task(), total, {}, {}, {}};
  double best_mean = -std::numeric_limits<double>::infinity();
  for (const auto& name : cfg.prune.criteria) {
    if (core::dist::stop_requested(r.stop)) return std::nullopt;
    const Criterion& crit = find_criterion(name);
    report.importance[name] = score_unpruned(in, crit, cfg.run.seed, rank, *r.store);
    const auto points = run_curve(in, crit, cfg.run.seed, rank, *r.store);
    if (core::dist::stop_requested(r.stop)) return std::nullopt;
    double sum = 0;
    for (const auto& p : points) sum += p.metrics.at("select_cosine_spearman");
    const double mean = sum / static_cast<double>(points.size());
    if ((name != "random" || c.best.empty()) && (mean > best_mean || c.best == "random"))
      best_mean = mean, c.best = name;
    report.points.insert(report.points.end(), points.begin(), points.end());
  }
  report.aggregates = aggregate(report.points, *r.objective, cfg.prune.bootstrap, cfg.run.seed);
  c.summary.files = write_curve_report(report);
  c.summary.fractions = largest_fraction_within(report.aggregates, total, 0.01);
  c.summary.areas = curve_area(report.aggregates);
  c.summary.aggregates = std::move(report.aggregates);
  c.importance = std::move(report.importance);
  return c;
}

}  // namespace

void validate_embedding_heads(const core::Config& cfg) {
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
  const bool taylor = std::count(p.criteria.begin(), p.criteria.end(), "taylor") || (p.method == core::MethodKind::kCriterion && p.method.criterion == "taylor");
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

int run_embedding_heads(const EmbedRun& r, RunSummary& s, const json& unpruned) {
  const core::Config& cfg = *r.cfg;
  const core::PruneConfig& p = cfg.prune;
  RankSet rs;
  make_rank_set(r, rs);
  s.rank_examples = static_cast<long>(rs.data.size());
  auto curves = run_curves(r, rs.rank);
  if (!curves) return kInterruptedExit;
  const auto& importance = curves->importance;
  s.curves = std::move(curves->summary);
  s.files = s.curves.files;
  const bool named = p.method == core::MethodKind::kCriterion || p.method == core::MethodKind::kGates;
  const std::string crit = named ? core::choice_text(p.method) : curves->best;
  const int total = r.teacher->model.config().total_heads();
  const HeadsModel m = heads_model(r, heads_after(r, importance.at(crit), total - p.target_heads), head_costs(r));
  core::log_info("prune", std::to_string(p.target_heads) + " heads by " + crit +
                              (named ? "" : " (the highest mean Spearman on the selection pairs over its curve)") +
                              ", " + core::format_number("%.0f", 100 * m.flops_kept) + "% of the encoder's FLOPs");
  std::vector<std::pair<std::string, core::Bert>> models;
  models.emplace_back("masked", slim_model(r.teacher->model, m.keep));
  const BudgetDirs dirs{r.state + "/heads", cfg.run.out_dir + "/recover"};
  fs::create_directories(dirs.state);
  if (auto rec = recovered_model(r, models.back().second, p, m.flops_kept, dirs.recovered))
    models.emplace_back("recovered", *rec);
  if (core::dist::stop_requested(r.stop)) return kInterruptedExit;
  json steps = json::object();
  const std::string chosen = score_variants(r, models, dirs.state, steps);
  FinalSummary f;
  f.method = choice_method_name(ChoiceMethod::kCriterion);
  f.criterion = crit;
  f.selected_step = chosen;
  f.metrics = summary_metrics(steps[chosen]);
  if (steps.contains("recovered")) f.metrics_before_recovery = summary_metrics(steps["masked"]);
  f.reference = teacher_reference(unpruned, steps[chosen]);
  const auto& model = std::find_if(models.begin(), models.end(), [&](const auto& x) { return x.first == chosen; });
  finish_one(r, model->second, m.keep, m.flops_kept, f, s,
             std::to_string(p.target_heads) + " heads by " + crit + ", " + chosen);
  return 0;
}

}  // namespace hp::prune
