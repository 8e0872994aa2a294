// The pruning run's budget mode: Kwon et al.'s search in stages 3-5 (see prune/stages/budget.h).
#include "prune/stages/budget.h"
#include "prune/stages/best_step.h"
#include "prune/stages/control.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/base/errors.h"
#include "core/base/strings.h"  // format_number
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/dist/distributed.h"
#include "core/io/checkpoint.h"
#include "core/io/tensor_io.h"
#include "eval/evaluator.h"
#include "eval/flops.h"
#include "eval/latency.h"
#include "core/plot/plot.h"
#include "prune/heads/schedule.h"
#include "prune/export/slim.h"

namespace hp::prune {

namespace fs = std::filesystem;

namespace {

std::string percent(double fraction) { return core::format_number("%.1f%%", 100 * fraction); }

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

Prunable prunable_of(const core::PruneConfig& p) {
  Prunable s{false, false};
  for (const auto& name : p.structures) {
    if (name == "heads") s.heads = true;
    else if (name == "neurons") s.neurons = true;
    else if (name == "hidden") s.hidden = true;
    else if (name == "layers") s.layers = true;
  }
  return s;
}

// "heads, FFN neurons, hidden channels and layers" as the search may remove them.
std::string searched_structures(Prunable p) {
  std::vector<std::string> v;
  if (p.heads) v.push_back("heads");
  if (p.neurons) v.push_back("FFN neurons");
  if (p.hidden) v.push_back("hidden channels");
  if (p.layers) v.push_back("whole layers");
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + v[i];
  return out;
}

// The lines the run draws, in plot order: Kwon et al.'s steps as their flags allow and their recovery, then the
// baselines (not with --max-drop: no candidate comes from them).
std::vector<BudgetLine> budget_lines(const core::PruneConfig& p) {
  std::vector<BudgetLine> v = {BudgetLine::kSearch};
  if (p.rearrange) v.push_back(BudgetLine::kRearranged);
  if (p.mask_tuning) v.push_back(BudgetLine::kTuned);
  if (budget_recover_steps(p, 0, true) > 0) v.push_back(BudgetLine::kRecovered);
  if (p.max_drop > 0) return v;  // the frontier measures the search's own candidates; the baselines are for the curves
  for (const auto b : {BudgetLine::kTaylor, BudgetLine::kMagnitude, BudgetLine::kRandom}) v.push_back(b);
  return v;
}

}  // namespace

bool budget_mode(const core::PruneConfig& p) {
  return p.target_flops > 0 || p.target_params > 0 || p.target_latency > 0 || p.max_drop > 0;
}

BudgetUnit budget_unit(const core::PruneConfig& p, const core::BertConfig& arch, double mean_len) {
  BudgetUnit u;
  u.mean_length = mean_len;
  const bool params = p.target_params > 0;
  u.name = params ? "parameters" : "FLOPs";
  u.costs = eval::unit_costs(arch, params, mean_len);
  u.target = params ? p.target_params : p.target_flops;
  u.total = eval::total_cost(arch, u.costs);
  return u;
}

namespace {

// The table measured on rank 0 and shared: the other ranks get its times through an all-reduce.
LatencyTable measure_shared(const RunContext& ctx, long batch, long seq, core::Precision p) {
  LatencyTable t = latency_layout(ctx.arch, batch, seq, p);
  if (core::dist::is_main()) {
    // The weights do not change the time: the model as given (its classifier fitted to the task's labels).
    const core::Bert model = core::load_bert(ctx.cfg->model.path, ctx.load);
    core::Progress progress("latency table", latency_configurations(ctx.arch), "configurations");
    t = measure_latency_table(model, batch, seq, p, [&](long done, long) { progress.update(done); });
    progress.finish();
  }
  if (!core::dist::active()) return t;
  std::vector<double> v = {t.unpruned_ms, t.fixed_ms, t.seconds};
  v.insert(v.end(), t.attention.ms.begin(), t.attention.ms.end());
  v.insert(v.end(), t.ffn.ms.begin(), t.ffn.ms.end());
  auto shared = torch::tensor(v, torch::kFloat64);
  if (!core::dist::is_main()) shared.zero_();
  core::dist::all_reduce_sum(shared, "the latency table");
  const double* d = shared.data_ptr<double>();
  t.unpruned_ms = d[0], t.fixed_ms = d[1], t.seconds = d[2];
  const size_t H = t.attention.ms.size();
  for (size_t k = 0; k < H; ++k) t.attention.ms[k] = d[3 + k];
  for (size_t k = 0; k < t.ffn.ms.size(); ++k) t.ffn.ms[k] = d[3 + H + k];
  fit_table(t, ctx.arch);
  return t;
}

std::string ms(double v) { return core::format_number("%.4g ms", v); }

BudgetUnit latency_unit(const RunContext& ctx) {
  const core::PruneConfig& P = ctx.cfg->prune;
  HP_CHECK(ctx.latency_table.has_value(), "the latency table is measured in stage 1");
  const long batch = ctx.latency_table->batch, seq = ctx.latency_table->seq;
  BudgetUnit u;
  u.name = "latency";
  u.table = ctx.latency_table;
  const LatencyTable& t = *u.table;
  const int L = ctx.arch.num_hidden_layers;
  // A slope measured at or below 0 (noise on a tiny model) would make units free: floor it.
  u.costs = {std::max(t.scale * t.attention.slope, 1e-6), std::max(t.scale * t.ffn.slope, 1e-9)};
  u.total = u.costs.head * ctx.arch.total_heads() + u.costs.neuron * ctx.arch.total_neurons();
  // A negative intercept is charged as 0: an emptied sublayer must never cost more than the budget assumed.
  u.fixed = t.fixed_ms + L * t.scale * (std::max(0.0, t.attention.intercept) + std::max(0.0, t.ffn.intercept));
  const double whole = u.total + u.fixed, floor = u.fixed + u.costs.head;
  const std::string where = " at batch " + std::to_string(batch) + " x " + std::to_string(seq) + " tokens at " +
                            t.precision + " on this machine";
  if (P.target_latency >= whole)
    throw ConfigError("prune.target_latency = " + ms(P.target_latency) + " but the unpruned model takes " + ms(whole) +
                      where + "; give less, or measure at another prune.latency_batch / latency_seq");
  if (P.target_latency < floor)
    throw ConfigError("prune.target_latency = " + ms(P.target_latency) + " is below the " + ms(floor) +
                      " that the embeddings, LayerNorms, classifier and one head take" + where + "; raise it");
  u.target = P.target_latency / whole;
  core::log_info("prune", "latency table" + where + ": fixed " + ms(t.fixed_ms) + ", attention " +
                              ms(t.attention.intercept) + " + " + ms(t.attention.slope) + "/head (R² " +
                              std::to_string(t.attention.r2).substr(0, 5) + "), FFN " + ms(t.ffn.intercept) + " + " +
                              ms(t.ffn.slope * 100) + "/100 neurons (R² " + std::to_string(t.ffn.r2).substr(0, 5) +
                              "), layer times x" + std::to_string(t.scale).substr(0, 5) +
                              " to match the whole model's " + ms(t.unpruned_ms));
  return u;
}

}  // namespace

void prepare_latency_budget(RunContext& ctx) {
  const core::PruneConfig& P = ctx.cfg->prune;
  if (P.target_latency <= 0) return;
  const long batch = P.latency_batch, seq = latency_seq(*ctx.cfg);
  const core::Precision precision = core::precision_setting(ctx.cfg->run.precision);
  const std::string path = ctx.cfg->run.out_dir + "/latency_table.json";
  if (fs::exists(path)) {  // a resumed run, or a table copied in to be reused
    auto t = nlohmann::json::parse(core::read_file(path)).get<LatencyTable>();
    if (t.key == latency_key(ctx.arch, batch, seq, precision)) ctx.latency_table = t;
    else
      core::log_info("prune",
                     path + " was measured for another shape, precision or machine (" + t.key + "); measuring again");
  }
  if (!ctx.latency_table) ctx.latency_table = measure_shared(ctx, batch, seq, precision);
  latency_unit(ctx);  // the target checked against what the model can reach
}

void save_latency_table(const RunContext& ctx) {
  if (!ctx.latency_table) return;
  const std::string path = ctx.cfg->run.out_dir + "/latency_table.json";
  const std::string text = nlohmann::json(*ctx.latency_table).dump(2) + "\n";
  if (fs::exists(path) && core::read_file(path) == text) return;
  core::shared_write([&] { core::write_file_atomic(path, text); });
}

BudgetUnit budget_unit(RunContext& ctx) {
  if (ctx.cfg->prune.target_latency > 0) {
    BudgetUnit u = latency_unit(ctx);
    u.mean_length = ctx.objective->mean_length();
    return u;
  }
  return budget_unit(ctx.cfg->prune, ctx.arch, ctx.objective->mean_length());
}

std::optional<MaskGradients> budget_gradients(RunContext& ctx) {
  const core::Config& cfg = *ctx.cfg;
  const core::PruneConfig& P = cfg.prune;
  if (ctx.search_set.size() == 0) {  // a task's sample of the rank split (an embedding run's is its sentences')
    ctx.search_set = core::encode_examples(
        *ctx.tok, sample_examples(ctx.rank_examples, P.search_examples, cfg.run.seed), cfg.data.max_seq_len);
    ctx.search = make_rank_data(*ctx.task, ctx.search_set, P.rank_batch_size, ctx.tok->pad_id());
  }
  const Prunable may = prunable_of(P);
  return stored_mask_gradients(cfg.run.out_dir + "/state/mask_gradients.h5", ctx.curves.working_model(), ctx.search,
                               may.hidden, may.layers, ctx.objective->mask_loss(), [&] {
                                 log_stage(3, "score",
                                           "mask gradients of every head and FFN neuron on " +
                                               std::to_string(ctx.search_set.size()) + " " + P.rank_split +
                                               " examples (Kwon et al. 2022)");
                                 return !core::dist::stop_requested(ctx.stop);
                               });
}

BudgetSearch search_structure(const core::PruneConfig& P, const core::Bert& model, const RankData& sample,
                              const MaskGradients& grads, const BudgetUnit& unit, double fraction, bool cls_last_layer) {
  const core::BertConfig& arch = model.config();
  BudgetSearch s;
  auto t = std::chrono::steady_clock::now();
  const Prunable may = prunable_of(P);
  s.searched = search_structures(fisher_importances(grads), unit.costs, unit.budget(fraction), may,
                                 may.hidden ? hidden_widths(arch.hidden_size, P.hidden_widths) : std::vector<long>{},
                                 layer_counts(arch.num_hidden_layers, P.layer_counts));
  s.seconds["search"] = seconds_since(t);
  t = std::chrono::steady_clock::now();
  s.rearranged = P.rearrange ? rearrange(s.searched, grads) : s.searched;
  s.seconds["rearrange"] = seconds_since(t);
  t = std::chrono::steady_clock::now();
  TuningOptions opts;
  opts.damping = P.tuning_damping;
  opts.cls_last_layer = cls_last_layer;
  s.scales = P.mask_tuning ? tune_masks(model, s.rearranged, sample, opts, &s.fits) : unit_scales(s.rearranged);
  s.seconds["tuning"] = seconds_since(t);
  return s;
}

BudgetSearch search_at(const RunContext& ctx, const MaskGradients& grads, const BudgetUnit& unit, double fraction) {
  return search_structure(ctx.cfg->prune, ctx.curves.working_model(), ctx.search, grads, unit, fraction,
                          ctx.objective->reads_first_token());
}

namespace {

// The last step's choice (the scales folded in) slimmed and fine-tuned by prune.curve_recover_steps as stage 6
// recovers, in RUN_DIR/budget_recover/<step> (resumed when its state is there), evaluated as a curve point of
// the original model's shape. Once the point is stored only the run's record stays (train_result.json and the
// config; the models and the optimizer state are removed), and best/ when the frontier (prune.max_drop) measures it
// as a candidate (prune/frontier/frontier_stage.h). Empty when stopped.
std::optional<CurvePoint> recovered_point(RunContext& ctx, const BudgetSearch& s, int step, double fraction) {
  const core::Config& cfg = *ctx.cfg;
  const std::string sub = "budget_recover/" + std::to_string(step), dir = budget_recover_dir(ctx, step);
  const std::string start = dir + ".start";
  if (!fs::exists(dir + "/state"))
    core::shared_write([&] {
      core::save_bert(slim_model(fold_scales(*ctx.model, s.scales), s.rearranged), start, ctx.model_dir);
    });
  const core::Config rc = recovery_config(cfg, budget_recover_steps(cfg.prune, fraction, true), true);
  if (!train_in(ctx, rc, sub, start, {}, 0, rc.gates.distill ? ctx.model_dir : "")) return std::nullopt;
  const core::Bert recovered = core::load_bert(dir + "/best", ctx.load);
  const core::BertConfig& slim = recovered.config();
  core::NeuronSet neurons;
  for (int l = 0; l < slim.num_hidden_layers; ++l) neurons.emplace_back(slim.ffn_width(l), true);
  CurvePoint p = evaluate_point(ctx.curves, recovered, budget_line_name(BudgetLine::kRecovered), cfg.run.seed, step,
                                all_heads(slim), neurons);
  p.kept = core::count_kept(s.rearranged.heads);  // in the original model's terms
  p.pruned = ctx.total_heads - p.kept;
  p.mask = core::format_head_mask(s.rearranged.heads);
  core::shared_write([&] {
    ctx.store->save_point(p);
    for (const auto& heavy : {dir + "/state", start}) fs::remove_all(heavy);
    if (cfg.prune.max_drop == 0) fs::remove_all(dir + "/best");
  });
  return p;
}

// The choices of a search as curve points of step `step` (each read back from the store when there).
std::vector<CurvePoint> budget_points(RunContext& ctx, const MaskGradients& grads, const BudgetUnit& unit, int step,
                                      double fraction) {
  const int seed = ctx.cfg->run.seed;
  const auto lines = budget_lines(ctx.cfg->prune);
  std::vector<CurvePoint> points;
  for (const auto line : lines)
    if (auto p = ctx.store->load_point(budget_line_name(line), seed, step)) points.push_back(*p);
  // --max-drop: the frontier's candidate here is chosen while the search is in hand (below); a run stopped between
  // the last point and that choice searches again for it.
  const bool choose = ctx.cfg->prune.max_drop > 0 && fraction < 1 && ctx.objective->size(Split::kSelect) > 0;
  if (points.size() == lines.size() && !(choose && !fs::exists(step_choice_file(ctx, step)))) return points;
  points.clear();
  const BudgetSearch s = search_at(ctx, grads, unit, fraction);
  const auto magnitude = magnitude_importance(*ctx.model);
  const auto random = random_unit_importance(ctx.arch, seed);
  // The baselines keep as many heads and neurons as the search chose, and its hidden channels; only which heads
  // and neurons differ.
  const long n_heads = core::count_kept(s.searched.heads), n_neurons = core::count_kept(s.searched.neurons);
  auto baseline = [&](torch::Tensor heads, torch::Tensor neurons) {
    if (!s.searched.layers.empty()) heads = heads.clone(), neurons = neurons.clone();
    for (size_t l = 0; l < s.searched.layers.size(); ++l)  // none of a removed layer's units
      if (!s.searched.layers[l])
        heads[static_cast<long>(l)].fill_(-1e300), neurons[static_cast<long>(l)].fill_(-1e300);
    StructureKeep k = top_units(heads, neurons, n_heads, n_neurons);
    k.layers = s.searched.layers, k.hidden = s.searched.hidden;
    return k;
  };
  const StructureKeep by_taylor = baseline(taylor_importance(grads.heads), taylor_importance(grads.neurons));
  const StructureKeep by_magnitude = baseline(magnitude.heads, magnitude.neurons);
  const StructureKeep by_random = baseline(random.heads, random.neurons);
  for (const auto line : lines) {
    // A resumed step keeps what it stored (a recovery is not trained twice).
    if (auto stored = ctx.store->load_point(budget_line_name(line), seed, step)) {
      points.push_back(std::move(*stored));
      continue;
    }
    if (line == BudgetLine::kRecovered) {
      auto p = recovered_point(ctx, s, step, fraction);
      if (!p) return {};
      points.push_back(std::move(*p));
      continue;
    }
    const auto& keep = line == BudgetLine::kSearch      ? s.searched
                       : line == BudgetLine::kTaylor    ? by_taylor
                       : line == BudgetLine::kMagnitude ? by_magnitude
                       : line == BudgetLine::kRandom    ? by_random
                                                        : s.rearranged;
    const core::Bert model = line == BudgetLine::kTuned ? fold_scales(*ctx.model, s.scales) : *ctx.model;
    CurvePoint p = evaluate_point(ctx.curves, model, budget_line_name(line), seed, step, keep);
    core::shared_write([&] { ctx.store->save_point(p); });
    points.push_back(std::move(p));
  }
  // --max-drop: which of the steps is the frontier's candidate here, while the search is in hand (the search
  // costs about a minute a budget; prune/stages/best_step.h).
  if (choose) {
    const bool recovered = std::count(lines.begin(), lines.end(), BudgetLine::kRecovered) > 0;
    budget_step_choice(ctx, s, step, fraction, recovered ? budget_recover_dir(ctx, step) : "");
  }
  return points;
}

// The non-prunable part of an Aggregate's flops or params (embeddings, pooler, classifier), so that
// (value − fixed) / unit.total is the fraction of the encoder's budget kept.
double fixed_part(const BudgetUnit& unit, const core::BertConfig& arch) {
  const long S = std::max(1L, std::lround(unit.mean_length));
  if (unit.name == "FLOPs") return eval::forward_flops(arch, 1, S) - eval::encoder_flops(arch, S);
  return static_cast<double>(eval::parameter_count(arch)) - unit.total;
}

// The unpruned model's latency measured on the curves (the best head criterion's 0-pruned point, else the 100%
// budget point); 0 when latency was not measured (prune.latency).
double unpruned_latency(const RunContext& ctx, const std::vector<const Aggregate*>& budget,
                        const CurvesSummary& heads, const std::string& best_heads) {
  for (const auto& a : heads.aggregates)
    if (a.criterion == best_heads && a.pruned == 0 && a.latency_ms > 0) return a.latency_ms;
  for (const auto* a : budget)
    if (a->kept == ctx.total_heads && a->latency_ms > 0 && a->params == eval::parameter_count(ctx.arch))
      return a->latency_ms;
  return 0;
}

// The x of a curve point: the fraction of the budget's unit kept (latency: measured, over the unpruned model's).
double kept_fraction(const Aggregate& a, const BudgetUnit& unit, double fixed, double base_ms) {
  if (unit.name == "latency") return base_ms > 0 ? a.latency_ms / base_ms : 0;
  return ((unit.name == "FLOPs" ? a.flops : static_cast<double>(a.params)) - fixed) / unit.total;
}

// The budget curves as data: every budget method's points, then the best head criterion's on the same axis.
BudgetCurves budget_data(const RunContext& ctx, const BudgetUnit& unit, const std::vector<Aggregate>& budget,
                         const CurvesSummary& heads) {
  std::string best_heads;
  double top = -1e300;
  for (const auto& [c, area] : heads.areas)
    if (c != "random" && area > top) top = area, best_heads = c;
  BudgetCurves d;
  d.task = ctx.task->name, d.metric = ctx.objective->task().primary_metric, d.split = ctx.cfg->prune.eval_split;
  d.unit = unit.name;
  d.latency_batch = ctx.curves.latency_batch, d.latency_seq = ctx.curves.latency_seq;
  std::vector<const Aggregate*> rows;  // grouped by method (the store gives them budget by budget)
  for (const auto line : budget_lines(ctx.cfg->prune))
    for (const auto& a : budget)
      if (a.criterion == budget_line_name(line)) rows.push_back(&a);
  d.unpruned_latency_ms = unpruned_latency(ctx, rows, heads, best_heads);
  const double fixed = fixed_part(unit, ctx.arch);
  auto add = [&](const Aggregate& a, const std::string& method) {
    d.points.push_back({method, kept_fraction(a, unit, fixed, d.unpruned_latency_ms), a.kept, a.params, a.flops,
                        a.mean, a.lo, a.hi, a.latency_ms});
  };
  for (const auto* a : rows) add(*a, a->criterion);
  for (const auto& a : heads.aggregates)
    if (a.criterion == best_heads) add(a, "heads only: " + a.criterion);
  return d;
}

// budget_curves.csv and budget_curves.svg; pareto.svg when latency was measured. Returns the files written.
std::vector<std::string> write_budget_report(const RunContext& ctx, const BudgetCurves& d) {
  std::vector<std::string> files = {"budget_curves.csv", "budget_curves.svg"};
  const auto pareto = pareto_chart(d);
  const std::string dir = ctx.cfg->run.out_dir;
  core::shared_write([&] {
    core::write_file_atomic(dir + "/budget_curves.csv", budget_csv(d));
    if (!core::write_svg_and_png(dir + "/budget_curves.svg", core::svg_line_chart(budget_chart(d))).empty())
      files.push_back("budget_curves.png");
    if (!pareto) return;
    files.push_back("pareto.svg");
    if (!core::write_svg_and_png(dir + "/pareto.svg", core::svg_line_chart(*pareto)).empty()) files.push_back("pareto.png");
  });
  return files;
}

// The budget curves' control (prune.control, where the curves recover and no frontier trains its own): the unpruned
// model trained as long as their longest recovery in RUN_DIR/budget_control, a point at 100% of the unit beside
// them. False when stopped.
bool add_curves_control(RunContext& ctx, const BudgetUnit& unit, BudgetCurves& d) {
  const core::PruneConfig& P = ctx.cfg->prune;
  if (!P.control || P.max_drop > 0 || !ctx.objective->has_control()) return true;
  const long steps = longest_candidate_training(ctx);  // the curves' recoveries (no gates trained yet)
  if (steps <= 0) return true;
  if (!train_control(ctx, steps, true, 4, "curves", "the longest recovery on the curves", kCurvesControlDir))
    return false;
  const core::Bert control = core::load_bert(ctx.cfg->run.out_dir + "/" + kCurvesControlDir + "/best", ctx.load);
  const CurvePoint p = evaluate_point(ctx.curves, control, "control", ctx.cfg->run.seed, 0, all_heads(ctx.arch));
  const Aggregate a = aggregate({p}, *ctx.objective, P.bootstrap, ctx.cfg->run.seed).at(0);
  d.points.push_back({"control", kept_fraction(a, unit, fixed_part(unit, ctx.arch), d.unpruned_latency_ms), a.kept,
                      a.params, a.flops, a.mean, a.lo, a.hi, a.latency_ms});
  return true;
}

}  // namespace

const char* budget_line_name(BudgetLine line) {
  switch (line) {
    case BudgetLine::kSearch: return "kwon-search";
    case BudgetLine::kRearranged: return "kwon-rearranged";
    case BudgetLine::kTuned: return "kwon-tuned";
    case BudgetLine::kRecovered: return "kwon-recovered";
    case BudgetLine::kTaylor: return "taylor-search";
    case BudgetLine::kMagnitude: return "magnitude-search";
    case BudgetLine::kRandom: return "random-search";
  }
  return "";
}

bool budget_point_at(RunContext& ctx, const MaskGradients& grads, int step, double fraction) {
  return !budget_points(ctx, grads, budget_unit(ctx), step, fraction).empty();
}

bool budget_curves(RunContext& ctx, const MaskGradients& grads, CurvesSummary& curves) {
  const core::PruneConfig& P = ctx.cfg->prune;
  const BudgetUnit unit = budget_unit(ctx);
  log_stage(4, "curves",
            "the budget search at " + std::to_string(P.budget_schedule.size()) + " points of " + unit.name + " kept");
  std::vector<CurvePoint> points;
  core::Progress progress("budget curves", static_cast<long>(P.budget_schedule.size()), "points");
  // The least a choice can cost: one head, and whatever prune.structures keeps whole.
  const Prunable may = prunable_of(P);
  const double least = (may.heads ? unit.costs.head : unit.costs.head * ctx.arch.total_heads()) +
                       (may.neurons ? 0.0 : unit.costs.neuron * ctx.arch.total_neurons());
  for (size_t k = 0; k < P.budget_schedule.size(); ++k) {
    if (core::dist::stop_requested(ctx.stop)) return false;
    if (unit.budget(P.budget_schedule[k] / 100.0) < least) {
      progress.update(static_cast<long>(k) + 1, std::to_string(P.budget_schedule[k]) + "%: below what one head costs");
      continue;
    }
    auto step = budget_points(ctx, grads, unit, static_cast<int>(k), P.budget_schedule[k] / 100.0);
    std::string metrics;  // "70%: kwon-search 0.87, kwon-rearranged 0.88, ..."
    for (const auto& p : step)
      metrics += (metrics.empty() ? "" : ", ") + p.criterion + " " +
                 std::to_string(p.metrics.at(ctx.objective->task().primary_metric)).substr(0, 6);
    progress.update(static_cast<long>(k) + 1, std::to_string(P.budget_schedule[k]) + "%: " + metrics);
    points.insert(points.end(), step.begin(), step.end());
  }
  progress.finish();
  const auto agg = aggregate(points, *ctx.objective, P.bootstrap, ctx.cfg->run.seed);
  curves.budget = budget_data(ctx, unit, agg, curves);
  if (!add_curves_control(ctx, unit, *curves.budget)) return false;
  for (const auto& f : write_budget_report(ctx, *curves.budget)) curves.files.push_back(f);
  return true;
}

void add_gates_point(RunContext& ctx, const FinalChoice& choice, CurvesSummary& curves) {
  if (!curves.budget) return;
  const BudgetUnit unit = budget_unit(ctx);
  const core::Bert gated = core::load_bert(choice.model_dir, ctx.load);
  // The whole structure the gates kept: their closed layers and hidden channels are removed too.
  const std::string gates = choice_method_name(ChoiceMethod::kGates);
  const CurvePoint p = evaluate_point(ctx.curves, gated, gates, ctx.cfg->run.seed, 0,
                                      core::StructureMask{choice.keep, choice.neurons, choice.layers, choice.hidden});
  const Aggregate a = aggregate({p}, *ctx.objective, ctx.cfg->prune.bootstrap, ctx.cfg->run.seed).at(0);
  BudgetCurves& d = *curves.budget;
  d.points.push_back({gates, kept_fraction(a, unit, fixed_part(unit, ctx.arch), d.unpruned_latency_ms), a.kept,
                      a.params, a.flops, a.mean, a.lo, a.hi, a.latency_ms});
  write_budget_report(ctx, d);
}

namespace {

// A latency budget's outcome: the target, the table's prediction for `slim` and its measured time (rank 0).
void latency_check(const RunContext& ctx, const LatencyTable& t, const core::Bert& slim, BudgetSummary& b) {
  b.latency["target"] = ctx.cfg->prune.target_latency;
  b.latency["predicted"] = predicted_latency(t, slim.config());
  b.latency["batch"] = static_cast<double>(t.batch), b.latency["seq"] = static_cast<double>(t.seq);
  if (!core::dist::is_main()) return;
  b.latency["measured"] = eval::measure_latency(slim, eval::synthetic_input(slim.config(), t.batch, t.seq)).median_ms;
  core::log_info("prune", "latency at batch " + std::to_string(t.batch) + " x " + std::to_string(t.seq) +
                              " tokens: target " + ms(b.latency["target"]) + ", predicted " +
                              ms(b.latency["predicted"]) + ", measured " + ms(b.latency["measured"]));
}

// The search at the target: each step evaluated, the scales folded, the slimmed model checked against masking
// with the scales, and saved to `dir`.
FinalChoice run_search(RunContext& ctx, const MaskGradients& grads, const BudgetUnit& unit, const std::string& dir) {
  const BudgetSearch s = search_at(ctx, grads, unit, unit.target);
  FinalChoice c;
  c.method = ChoiceMethod::kKwon;
  c.keep = s.rearranged.heads;
  c.model_dir = dir;
  c.slimmed = true;
  BudgetSummary b;
  b.unit = unit.name, b.target = unit.target, b.mean_length = unit.mean_length;
  b.kept = (structure_cost(s.rearranged, unit.costs) + unit.fixed) / (unit.total + unit.fixed);
  describe_structure(s.rearranged, b);
  b.seconds = s.seconds;
  const auto attrs = core::read_hdf5_attrs(ctx.cfg->run.out_dir + "/state/mask_gradients.h5");
  if (attrs.count("seconds")) b.seconds["gradients"] = std::stod(attrs.at("seconds"));
  auto metrics_of = [&](const MaskScales& scales) {  // the layers and hidden channels as chosen
    eval::Masks m = eval::masks_of(s.rearranged);
    m.heads = scales.heads, m.neurons = scales.neurons;
    return evaluate_on(ctx.curves, *ctx.model, Split::kEval, m);
  };
  b.metrics_by_step["search"] = metrics_of(unit_scales(s.searched)).metrics;
  b.metrics_by_step["rearranged"] = metrics_of(unit_scales(s.rearranged)).metrics;
  const auto scaled = metrics_of(s.scales);
  b.metrics_by_step["tuned"] = scaled.metrics;
  const core::Bert slim = slim_model(fold_scales(*ctx.model, s.scales), s.rearranged);
  const auto slim_eval = evaluate_on(ctx.curves, slim, Split::kEval);
  b.folded_vs_scaled_max_abs_logit_diff = (slim_eval.logits - scaled.logits).abs().max().item<double>();
  if (ctx.cfg->prune.verify && b.folded_vs_scaled_max_abs_logit_diff > kFoldedLogitTolerance)
    throw InternalError("the slimmed model with the tuning scales folded in differs from masking with the scales by " +
                        std::to_string(b.folded_vs_scaled_max_abs_logit_diff) + " (> " +
                        core::format_number("%g", kFoldedLogitTolerance) + ")");
  if (unit.table) latency_check(ctx, *unit.table, slim, b);
  c.metrics_before_recovery = slim_eval.metrics;
  c.budget = b;
  core::shared_write([&] {
    core::StagedFolder(dir).write([&](const std::string& staged) {  // the model and its choice.json appear together
      core::write_bert_files(slim, staged, ctx.model_dir);
      nlohmann::json j = {
          {"heads_mask", core::format_head_mask(c.keep)}, {"budget", b}, {"metrics", c.metrics_before_recovery}};
      if (!s.rearranged.hidden.empty() || !s.rearranged.layers.empty())
        j["coarse_mask"] = core::format_mask({{}, {}, s.rearranged.layers, s.rearranged.hidden});
      core::write_file_atomic(staged + "/choice.json", j.dump(2) + "\n");
    });
  });
  return c;
}

}  // namespace

FinalChoice choose_budget(RunContext& ctx, const MaskGradients& grads) {
  const BudgetUnit unit = budget_unit(ctx);
  const std::string dir = ctx.cfg->run.out_dir + "/search";
  FinalChoice c;
  if (fs::exists(dir + "/choice.json")) {  // a resumed run: the search finished before
    const auto j = nlohmann::json::parse(core::read_file(dir + "/choice.json"));
    c.method = ChoiceMethod::kKwon, c.model_dir = dir, c.slimmed = true;
    c.keep =
        core::parse_head_mask(j.at("heads_mask").get<std::string>(), ctx.arch.num_hidden_layers, ctx.arch.max_heads());
    c.budget = j.at("budget").get<BudgetSummary>();
    c.metrics_before_recovery = j.at("metrics").get<std::map<std::string, double>>();
  } else {
    log_stage(5, "choose",
              "the " + searched_structures(prunable_of(ctx.cfg->prune)) +
                  " that fit " + percent(unit.target) + " of the encoder's " + unit.name +
                  " (search, rearrangement, mask tuning on " + std::to_string(ctx.search_set.size()) + " examples)");
    c = run_search(ctx, grads, unit, dir);
  }
  const BudgetSummary& b = *c.budget;
  const std::string& metric = ctx.objective->task().primary_metric;
  core::log_info(
      "prune",
      "kept " + std::to_string(core::count_kept(c.keep)) + "/" + std::to_string(ctx.total_heads) + " heads and " +
          std::to_string(b.neurons_kept) + "/" + std::to_string(b.neurons_total) + " neurons" +
          (b.hidden_total > 0
               ? ", " + std::to_string(b.hidden_kept) + "/" + std::to_string(b.hidden_total) + " hidden channels"
               : std::string()) +
          (b.layers_total > 0 ? ", " + std::to_string(b.layers_kept) + "/" + std::to_string(b.layers_total) + " layers"
                              : std::string()) +
          ": " + percent(b.kept) +
          (b.unit == "latency" ? " of the model's latency (predicted)" : " of the encoder's " + b.unit) + "; " +
          metric + " search " + std::to_string(b.metrics_by_step.at("search").at(metric)) + ", rearranged " +
          std::to_string(b.metrics_by_step.at("rearranged").at(metric)) + ", tuned " +
          std::to_string(b.metrics_by_step.at("tuned").at(metric)));
  return c;
}

}  // namespace hp::prune
