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

// Each criterion's importance of the teacher's heads [L, H], scored once (RunStore).
std::map<std::string, torch::Tensor> score_heads(const EmbedRun& r, const RankData& rank) {
  const core::Config& cfg = *r.cfg;
  const core::Bert& teacher = r.teacher->model;
  std::map<std::string, torch::Tensor> out;
  log_step(2, std::to_string(cfg.prune.criteria.size()) + " criteria on " + std::to_string(rank.data->size()) +
                  " training sentences, the embedding's loss or target for each (prune/heads/criteria.h)");
  for (const auto& name : cfg.prune.criteria) {
    if (core::dist::stop_requested(r.stop)) return {};
    if (auto stored = r.store->load_importance(name, cfg.run.seed, 0)) {
      out[name] = *stored;
      continue;
    }
    CriterionContext c;
    c.model = &teacher, c.rank = &rank, c.opts = &cfg.prune, c.seed = cfg.run.seed, c.embedding = &r.pooling;
    c.keep = torch::ones({teacher.config().num_hidden_layers, teacher.config().max_heads()});
    std::optional<core::Progress> progress;  // made at the first report, when the unit and total are known
    c.progress = [&](long done, long of, const std::string& unit) {
      if (!progress) progress.emplace("score " + name, of, unit);
      progress->update(done);
    };
    out[name] = find_criterion(name).score(c).to(torch::kFloat32);
    if (progress) progress->finish();
    r.store->save_importance(name, cfg.run.seed, 0, out[name]);
  }
  return out;
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
  const auto singles = eval::encode_sentences(*r.teacher, single_sentences(r.eval_pairs), 0);
  Costs c;
  c.unit = eval::unit_costs(arch, false, core::mean_length(singles));
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
  std::string best;
};

// Every criterion's curve (STATE/curves/CRITERION-PRUNED.json once scored), written as a task's curves are
// (prune/heads/report.h: curves.csv, curves.svg, the importance heatmaps and run.h5) with cosine Spearman on the
// evaluation pairs as the metric; one seed, so no band. The best criterion: the highest mean Spearman on the selection
// pairs over its curve, random passed over beside others.
std::optional<Curves> run_curves(const EmbedRun& r, const TeacherEmbeddings& te,
                                 const std::map<std::string, torch::Tensor>& importance) {
  const core::Config& cfg = *r.cfg;
  const int total = r.teacher->model.config().total_heads();
  const std::vector<int> counts = schedule_counts(cfg.prune.schedule, cfg.prune.schedule_unit, total);
  log_step(3, "curves: " + std::to_string(counts.size()) +
                  " points per criterion, the teacher slimmed to the heads "
                  "kept and scored on the selection and evaluation pairs");
  Curves c;
  std::vector<CurvePoint> points;
  double best_mean = -std::numeric_limits<double>::infinity();
  const Costs costs = head_costs(r);
  core::Progress progress("curves", static_cast<long>(counts.size() * importance.size()), "points");
  long done = 0;
  for (const auto& name : cfg.prune.criteria) {
    double sum = 0;
    for (size_t k = 0; k < counts.size(); ++k) {
      if (core::dist::stop_requested(r.stop)) return std::nullopt;
      const int n = counts[k];
      const core::HeadSet heads = heads_after(r, importance.at(name), n);
      const json v = cached(r.state + "/curves", name + "-" + std::to_string(n), [&] {
        const HeadsModel m = heads_model(r, heads, costs);
        const core::Bert slim = slim_model(r.teacher->model, m.keep);
        json j = score(r, {r.teacher->layout, slim, r.teacher->tokenizer}, te);
        j["flops_kept"] = m.flops_kept;
        j["params"] = eval::parameter_count(slim.config());
        return j;
      });
      progress.update(++done);
      CurvePoint p;
      p.criterion = name, p.seed = cfg.run.seed, p.step = static_cast<int>(k), p.pruned = n, p.kept = total - n;
      p.mask = core::format_head_mask(heads);
      p.metrics = summary_metrics(v);
      p.params = v.value("params", 0L);
      p.flops = v.at("flops_kept").get<double>() * costs.total;
      Aggregate a;
      a.criterion = name, a.pruned = n, a.kept = total - n, a.seeds = 1;
      a.mean = a.lo = a.hi = p.metrics.at("cosine_spearman");
      a.metrics = p.metrics, a.params = p.params, a.flops = p.flops;
      points.push_back(std::move(p));
      c.summary.aggregates.push_back(std::move(a));
      sum += v.at("select_spearman").get<double>();
    }
    const double mean = sum / static_cast<double>(counts.size());
    if ((name != "random" || c.best.empty()) && (mean > best_mean || c.best == "random"))
      best_mean = mean, c.best = name;
  }
  progress.finish();
  core::TaskSpec task = core::find_task(cfg.data.task);  // the embedding's metric in place of the task's
  task.primary_metric = "cosine_spearman";
  CurveReport report{cfg.run.out_dir, core::dump_yaml(cfg), &task, total, std::move(points), c.summary.aggregates,
                     importance};
  c.summary.files = write_curve_report(report);
  c.summary.fractions = largest_fraction_within(c.summary.aggregates, total, 0.01);
  c.summary.areas = curve_area(c.summary.aggregates);
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

int run_embedding_heads(const EmbedRun& r, const TeacherEmbeddings& te, RunSummary& s, const json& unpruned) {
  const core::Config& cfg = *r.cfg;
  const core::PruneConfig& p = cfg.prune;
  RankSet rs;
  make_rank_set(r, rs);
  s.rank_examples = static_cast<long>(rs.data.size());
  const auto importance = score_heads(r, rs.rank);
  if (core::dist::stop_requested(r.stop)) return kInterruptedExit;
  auto curves = run_curves(r, te, importance);
  if (!curves) return kInterruptedExit;
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
  if (auto rec = recovered_model(r, te, models.back().second, p, m.flops_kept, dirs.recovered))
    models.emplace_back("recovered", *rec);
  if (core::dist::stop_requested(r.stop)) return kInterruptedExit;
  json steps = json::object();
  const std::string chosen = score_variants(r, models, dirs.state, te, steps);
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
