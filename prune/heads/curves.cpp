// Masking curves (see prune/heads/curves.h).
#include "prune/heads/curves.h"

#include <optional>

#include <algorithm>
#include <random>

#include "core/dist/distributed.h"
#include "core/base/errors.h"
#include "core/base/log.h"
#include "eval/evaluator.h"
#include "eval/flops.h"
#include "eval/latency.h"
#include "eval/metrics.h"
#include "prune/heads/schedule.h"
#include "prune/export/slim.h"

namespace hp::prune {

Matrix to_matrix(const torch::Tensor& t) {
  auto c = t.to(torch::kFloat64).contiguous();
  Matrix m(c.size(0), std::vector<double>(c.size(1)));
  for (int64_t l = 0; l < c.size(0); ++l)
    for (int64_t h = 0; h < c.size(1); ++h) m[l][h] = c[l][h].item<double>();
  return m;
}

namespace {

// The criterion's importance with `keep` applied, `pruned` heads already removed; cached in the store.
torch::Tensor importance_at(const CurveInputs& in, const Criterion& crit, int seed, const RankData& rank,
                            RunStore& store, const core::HeadSet& keep, int pruned) {
  if (auto cached = store.load_importance(crit.name, seed, pruned)) return *cached;
  CriterionContext c;
  c.model = &in.working_model();
  c.rank = &rank;
  c.keep = eval::head_mask_tensor(keep);
  c.opts = in.opts;
  c.seed = seed;
  c.embedding = in.objective->pooling();
  core::log_info("prune", std::string("scoring ") + crit.name + " (seed " + std::to_string(seed) + ", " +
                              std::to_string(pruned) + " heads pruned) on " + std::to_string(rank.data->size()) +
                              " examples");
  std::optional<core::Progress> progress;  // made at the first report, when the unit and total are known
  long total = 0;
  c.progress = [&](long done, long of, const std::string& unit) {
    if (!progress) progress.emplace(std::string("score ") + crit.name, of, unit), total = of;
    progress->update(done);
  };
  auto imp = crit.score(c).to(torch::kCPU, torch::kFloat32);
  if (progress) {
    progress->update(total);
    progress->finish();
  }
  store.save_importance(crit.name, seed, pruned, imp);
  return imp;
}

}  // namespace

eval::EvalResult evaluate_on(const CurveInputs& in, const core::Bert& model, Split split, const eval::Masks& masks) {
  if (!in.score_model || model.precision() != core::Precision::kFp32)
    return in.objective->evaluate(model, split, masks);
  std::optional<core::Bert> copy;
  const core::Bert& there = &model == in.model ? *in.score_model : copy.emplace(model.to(in.score_model->device()));
  return in.objective->evaluate(there, split, masks);
}

CurvePoint evaluate_point(const CurveInputs& in, const core::Bert& model, const std::string& criterion, int seed,
                          int step, const core::HeadSet& keep, const core::NeuronSet& neurons) {
  return evaluate_point(in, model, criterion, seed, step, core::StructureMask{keep, neurons});
}

CurvePoint evaluate_point(const CurveInputs& in, const core::Bert& model, const std::string& criterion, int seed,
                          int step, const core::StructureMask& structure) {
  const core::HeadSet& keep = structure.heads;
  core::Bert slim = slim_model(model, structure);
  slim.set_precision(in.precision);
  auto r = evaluate_on(in, slim, Split::kEval);
  CurvePoint p;
  p.criterion = criterion, p.seed = seed, p.step = step;
  p.kept = core::count_kept(keep);
  p.pruned = model.config().total_heads() - p.kept;
  p.mask = core::format_head_mask(keep);
  p.metrics = r.metrics;
  if (in.select_too)
    for (const auto& [name, v] : evaluate_on(in, slim, Split::kSelect).metrics) p.metrics["select_" + name] = v;
  p.predictions = r.predictions;
  p.params = eval::parameter_count(slim.config());
  p.flops = eval::forward_flops(slim.config(), 1, std::lround(in.objective->mean_length()));
  p.eval_seconds = r.seconds;
  p.eval_examples_per_s = r.examples_per_s;
  if (in.opts->latency)
    p.latency_ms =
        eval::measure_latency(slim, eval::synthetic_input(slim.config(), in.latency_batch, in.latency_seq), 1, 3, 0.3).median_ms;
  return p;
}

namespace {

CurvePoint evaluate_point(const CurveInputs& in, const std::string& criterion, int seed, int step,
                          const core::HeadSet& keep) {
  return evaluate_point(in, *in.model, criterion, seed, step, keep);
}

// Walks the schedule up to `upto` points, calling `visit(step, keep)` at each.
template <class Visit>
void walk(const CurveInputs& in, const Criterion& crit, int seed, const RankData& rank, RunStore& store,
          const std::vector<int>& counts, Visit visit) {
  const core::HeadSet all = all_heads(in.model->config());
  RankOptions ro;
  ro.per_layer = in.opts->per_layer;
  ro.min_heads_per_layer = in.opts->min_heads_per_layer;
  core::HeadSet keep = all;
  int pruned = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (in.opts->iterative) {
      // Re-score the heads still present, then prune the next few from there.
      keep = prune_to(to_matrix(importance_at(in, crit, seed, rank, store, keep, pruned)), keep, counts[i], ro);
    } else {
      keep = prune_to(to_matrix(importance_at(in, crit, seed, rank, store, all, 0)), all, counts[i], ro);
    }
    pruned = counts[i];
    visit(static_cast<int>(i), keep);
  }
}

}  // namespace

torch::Tensor score_unpruned(const CurveInputs& in, const Criterion& crit, int seed, const RankData& rank,
                             RunStore& store) {
  return importance_at(in, crit, seed, rank, store, all_heads(in.model->config()), 0);
}

std::vector<CurvePoint> run_curve(const CurveInputs& in, const Criterion& crit, int seed, const RankData& rank,
                                  RunStore& store) {
  std::vector<CurvePoint> points;
  // Started at the first point evaluated here, after the scoring (which has its own progress) and
  // after the points a resumed run reads back: its rate and ETA are those of evaluating points.
  std::optional<core::Progress> progress;
  const std::string& metric = in.objective->task().primary_metric;
  walk(in, crit, seed, rank, store, in.counts, [&](int step, const core::HeadSet& keep) {
    if (core::dist::stop_requested(in.stop)) return;
    auto p = store.load_point(crit.name, seed, step);
    if (!p) {
      if (!progress)
        progress.emplace(std::string("curve ") + crit.name, static_cast<long>(in.counts.size()), "points", step);
      p = evaluate_point(in, crit.name, seed, step, keep);
      store.save_point(*p);
    }
    points.push_back(*p);
    if (progress)
      progress->update(step + 1,
                       std::to_string(p->pruned) + " pruned: " + metric + " " + std::to_string(p->metrics.at(metric)));
  });
  if (progress) progress->finish();
  return points;
}

core::HeadSet mask_for_count(const CurveInputs& in, const Criterion& crit, int seed, const RankData& rank,
                             RunStore& store, int n_pruned) {
  std::vector<int> counts;
  for (int c : in.counts)
    if (c < n_pruned) counts.push_back(c);
  counts.push_back(n_pruned);
  core::HeadSet last;
  walk(in, crit, seed, rank, store, counts, [&](int, const core::HeadSet& keep) { last = keep; });
  return last;
}

std::vector<Aggregate> aggregate(const std::vector<CurvePoint>& points, const Objective& objective, int bootstrap,
                                 int seed) {
  const std::vector<float> gold = objective.gold(Split::kEval);
  const std::string& metric = objective.task().primary_metric;
  // Group by (criterion, step), keeping the first-seen criterion order.
  std::vector<std::pair<std::string, int>> keys;
  std::map<std::pair<std::string, int>, std::vector<const CurvePoint*>> groups;
  for (const auto& p : points) {
    HP_CHECK(p.predictions.empty() || p.predictions.size() == gold.size(),
             "curve point " << p.criterion << " step " << p.step << ": " << p.predictions.size()
                            << " predictions for " << gold.size() << " gold labels");
    auto key = std::make_pair(p.criterion, p.step);
    if (!groups.count(key)) keys.push_back(key);
    groups[key].push_back(&p);
  }
  std::vector<Aggregate> out;
  std::mt19937_64 gen(static_cast<uint64_t>(seed) + 7);
  const size_t n = gold.size();
  for (const auto& key : keys) {
    const auto& g = groups.at(key);
    Aggregate a;
    a.criterion = key.first;
    a.pruned = g[0]->pruned, a.kept = g[0]->kept;
    a.params = g[0]->params, a.flops = g[0]->flops;
    a.seeds = static_cast<int>(g.size());
    for (const auto* p : g) {
      for (const auto& [name, v] : p->metrics) a.metrics[name] += v / g.size();
      a.eval_examples_per_s += p->eval_examples_per_s / g.size();
      a.latency_ms += p->latency_ms / g.size();
    }
    a.mean = a.lo = a.hi = a.metrics.at(metric);
    if (bootstrap > 0 && n > 1) {
      std::vector<double> stats;
      std::vector<float> pred, gsub;
      for (int r = 0; r < bootstrap; ++r) {
        const auto idx = eval::resample_rows(gold, gen);
        pred.resize(idx.size()), gsub.resize(idx.size());
        double mean = 0;
        for (const auto* p : g) {
          for (size_t k = 0; k < idx.size(); ++k) pred[k] = p->predictions[idx[k]], gsub[k] = gold[idx[k]];
          mean += objective.metric_of(pred, gsub) / g.size();
        }
        stats.push_back(mean);
      }
      std::sort(stats.begin(), stats.end());
      a.lo = stats[static_cast<size_t>(0.025 * (stats.size() - 1))];
      a.hi = stats[static_cast<size_t>(0.975 * (stats.size() - 1))];
    }
    out.push_back(a);
  }
  return out;
}

}  // namespace hp::prune
