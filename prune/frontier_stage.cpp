// The frontier stage (see prune/frontier_stage.h).
#include "prune/frontier_stage.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <sstream>
#include <tuple>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/dist/distributed.h"
#include "core/io/checkpoint.h"
#include "core/kernels/lowp_gemm.h"
#include "eval/evaluator.h"
#include "eval/flops.h"
#include "eval/latency.h"
#include "prune/budget.h"
#include "prune/mask_tuning.h"
#include "prune/onnx.h"
#include "prune/slim.h"

namespace hp::prune {

namespace fs = std::filesystem;

namespace {

// One structure: what it is (the point's fields but precision and measurements) and how to build it slimmed.
struct Candidate {
  FrontierPoint point;
  std::string key;  // file stem under state/frontier/
  std::function<core::Bert()> build;
};

std::string percent(double fraction) { return std::to_string(std::lround(100 * fraction)) + "%"; }

// The unpruned model and the best head criterion at each count of the schedule (neither empty nor whole).
std::vector<Candidate> head_candidates(const RunContext& ctx, const CurvesSummary& curves) {
  const core::Bert& model = *ctx.model;
  std::vector<Candidate> out;
  Candidate unpruned{{}, "unpruned", [&model] { return model; }};
  unpruned.point.method = "unpruned", unpruned.point.heads_kept = ctx.total_heads;
  out.push_back(unpruned);
  std::string why;
  const std::string crit = best_criterion(curves, &why);
  // The encoder's part of a curve point's FLOPs (per example at the mean length), as budget_unit counts them.
  const long S = std::max(1L, std::lround(core::mean_length(ctx.eval_data)));
  const double encoder = eval::encoder_flops(ctx.arch, S), fixed = eval::forward_flops(ctx.arch, 1, S) - encoder;
  for (size_t step = 0; step < ctx.curves.counts.size(); ++step) {
    const int pruned = ctx.curves.counts[step];
    if (pruned == 0 || pruned == ctx.total_heads) continue;
    const auto stored = ctx.store->load_point(crit, ctx.cfg->run.seed, static_cast<int>(step));
    HP_CHECK(stored, "frontier: the " + crit + " curve has no point " + std::to_string(step));
    const core::HeadSet keep =
        core::parse_head_mask(stored->mask, ctx.arch.num_hidden_layers, ctx.arch.num_attention_heads, "curve point");
    Candidate c{{}, "heads-" + crit + "-" + std::to_string(step), [&model, keep] { return slim_model(model, keep); }};
    c.point.method = "heads", c.point.criterion = crit, c.point.step = static_cast<int>(step);
    c.point.heads_kept = ctx.total_heads - pruned;
    c.point.budget = std::to_string(c.point.heads_kept) + " heads";
    c.point.flops_kept = (stored->flops - fixed) / encoder;
    out.push_back(c);
  }
  return out;
}

// The budget search at each point of prune.budget_schedule below 100%: the recovered model the budget curves kept
// (RUN_DIR/budget_recover/<step>/best), or with prune.curve_recover_steps = 0 the tuned choice folded and slimmed.
std::vector<Candidate> budget_candidates(const RunContext& ctx, const MaskGradients& grads) {
  const core::PruneConfig& P = ctx.cfg->prune;
  const bool recovered = (P.curve_recover_steps < 0 ? P.recover_steps : P.curve_recover_steps) > 0;
  const std::string method = recovered ? "kwon-recovered" : "kwon-tuned";
  std::vector<Candidate> out;
  for (size_t step = 0; step < P.budget_schedule.size(); ++step) {
    const double fraction = P.budget_schedule[step] / 100.0;
    const auto stored = ctx.store->load_point(method, ctx.cfg->run.seed, static_cast<int>(step));
    if (fraction >= 1 || !stored) continue;  // 100%, or a point below what one head costs
    std::function<core::Bert()> build;
    if (recovered) {
      const std::string dir = ctx.cfg->run.out_dir + "/budget_recover/" + std::to_string(step) + "/best";
      if (!fs::exists(dir + "/config.json"))
        throw InputError(dir + " is missing (the frontier measures the recovered model there); delete " +
                         ctx.store->dir() + "/state/points/" + method + "* to train it again, or pass a new --out");
      build = [dir, &ctx] { return core::load_bert(dir, ctx.load); };
    } else {
      build = [&ctx, &grads, fraction] {
        const BudgetSearch s =
            search_at(ctx, grads, budget_unit(ctx.cfg->prune, ctx.arch, core::mean_length(ctx.eval_data)), fraction);
        return slim_model(fold_scales(*ctx.model, s.scales), s.rearranged.heads, s.rearranged.neurons);
      };
    }
    Candidate c{{}, method + "-" + std::to_string(step), build};
    c.point.method = method, c.point.step = static_cast<int>(step), c.point.heads_kept = stored->kept;
    c.point.flops_kept = fraction, c.point.budget = percent(fraction) + " FLOPs";
    out.push_back(c);
  }
  return out;
}

// Hard-Concrete gates on heads, FFN neurons and sublayers (and the layers and hidden channels prune.structures
// names) to `fraction` of the encoder's FLOPs (CoFi), trained in
// RUN_DIR/frontier_gates/<percent> as `--method gates --target-flops` trains them in stage 5 (resumed there); the
// candidate is the gated model slimmed by its mask. Empty when stopped.
std::optional<Candidate> gates_candidate(RunContext& ctx, double fraction) {
  const long pct = std::lround(100 * fraction);
  const std::string sub = frontier_gates_dir(pct), dir = ctx.cfg->run.out_dir + "/" + sub;
  if (!fs::exists(dir + "/train_result.json")) {
    const core::Config c = gates_budget_config(*ctx.cfg, fraction, 0);
    log_stage(5, "frontier",
              std::string("Hard-Concrete gates on heads, FFN neurons and sublayers") +
                  (c.gates.layer_gates ? ", layers" : "") + (c.gates.hidden_gates ? ", hidden channels" : "") +
                  " to " + percent(fraction) + " of the encoder's FLOPs, in " + dir);
    if (!train_in(ctx, c, sub, ctx.model_dir)) return std::nullopt;
  }
  const auto tr = nlohmann::json::parse(core::read_file(dir + "/train_result.json"));
  const core::StructureMask keep = gated_mask(ctx, tr);
  Candidate c{{}, "gates-" + std::to_string(pct), [&ctx, dir, keep] {
                return slim_model(core::load_bert(dir + "/best", ctx.load), keep);
              }};
  c.point.method = "gates", c.point.step = static_cast<int>(pct), c.point.heads_kept = core::count_kept(keep.heads);
  c.point.flops_kept = tr.at("budget").at("kept").get<double>(), c.point.budget = percent(fraction) + " FLOPs";
  return c;
}

// fp32 is among prune.frontier_precisions (otherwise only the unpruned model is measured at fp32, as the baseline).
bool fp32_asked(const core::PruneConfig& P) {
  return std::count(P.frontier_precisions.begin(), P.frontier_precisions.end(), "fp32") > 0;
}

// prune.frontier_precisions that this CPU runs natively, fp32 first (always: it is the baseline's).
std::vector<core::Precision> native_precisions(const core::PruneConfig& P) {
  std::vector<core::Precision> v = {core::Precision::kFp32};
  for (auto p : {core::Precision::kBf16, core::Precision::kInt8}) {
    const bool asked = std::count(P.frontier_precisions.begin(), P.frontier_precisions.end(), core::precision_name(p));
    if (asked && core::lowp_native(p)) v.push_back(p);
  }
  return v;
}

// The name of a timing in FrontierPoint::speedups and frontier.csv: "b32_128".
std::string timing_key(long batch, long seq) { return "b" + std::to_string(batch) + "_" + std::to_string(seq); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Unpruned fp32 time over the candidate's: the median over 3 alternating rounds (each model's median time in the
// round) of the round's ratio, so that a passing slowdown of the machine lands on one round, not on one model. A
// spread of more than x2 between the rounds' ratios means the machine was busy: said once per measurement.
double speedup_against(const core::Bert& base, const core::Bert& model, long batch, long seq, const std::string& what,
                       double seconds) {
  const auto in = eval::synthetic_input(base.config(), batch, seq);
  std::vector<double> ratios;
  for (int round = 0; round < 3; ++round) {
    const double b = eval::measure_latency(base, in, 1, 3, seconds).median_ms;
    ratios.push_back(b / eval::measure_latency(model, in, 1, 3, seconds).median_ms);
  }
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  if (*hi > 2 * *lo) {
    std::ostringstream w;
    w << what << " at batch " << batch << " x " << seq << ": the rounds' speedups range from x" << *lo << " to x" << *hi
      << " (other work shares the cores?): this speedup is their median, not a figure to quote";
    core::log_warn("frontier", w.str());
  }
  return median(ratios);
}

// One structure at one precision: the metric on the evaluation split (points) and the speedups.
FrontierPoint measure(const RunContext& ctx, const core::Bert& base, const core::Bert& slim, FrontierPoint p,
                      core::Precision precision, long batch, long seq) {
  core::Bert m = slim;
  m.set_precision(precision);
  eval::calibrate_int8(m, *ctx.cfg, *ctx.tok);  // int8 only (run.calibrate examples of the train split)
  const auto r = eval::evaluate(m, *ctx.task, ctx.eval_data, ctx.curves.eval_batches);
  p.precision = core::precision_name(precision);
  p.metric = 100 * r.metrics.at(ctx.task->primary_metric);
  const long mean = std::max(1L, std::lround(core::mean_length(ctx.eval_data)));
  const std::string main = timing_key(batch, seq);
  const std::string what = frontier_label(p);
  const double seconds = ctx.cfg->prune.frontier_time;
  p.speedups[main] = speedup_against(base, m, batch, seq, what, seconds);
  p.speedups[timing_key(1, mean)] = speedup_against(base, m, 1, mean, what, seconds);
  p.speedup = p.speedups[main];
  return p;
}

// A stored measurement, or InputError naming the file (written atomically, so only a hand can break it).
FrontierPoint read_point(const std::string& file) {
  try {
    return nlohmann::json::parse(core::read_file(file)).get<FrontierPoint>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(file + ": not a frontier measurement (" + e.what() + "); delete it and rerun to measure again");
  }
}

// ONNX Runtime's reference points (prune/onnx.h: ort_reference), timed against the unpruned fp32 model measured just
// before and after them (the mean of both: ONNX Runtime runs in another process, so rounds cannot alternate). The
// headprune time is stored beside ONNX Runtime's, so a resumed run draws the same points.
void add_ort_points(const RunContext& ctx, const core::Bert& base, long batch, long seq, Frontier& f) {
  const std::string dir = ctx.store->dir() + "/state/frontier/ort", base_file = dir + "/headprune.json";
  const auto in = eval::synthetic_input(base.config(), batch, seq);
  const bool fresh = !fs::exists(base_file);
  const double seconds = ctx.cfg->prune.frontier_time;
  const double before = fresh ? eval::measure_latency(base, in, 1, 3, seconds).median_ms : 0;
  std::string skipped;
  const auto r = ort_reference(ctx.model_dir, *ctx.task, ctx.eval_data, batch, seq, dir, &skipped);
  if (!r) {
    f.onnxruntime = skipped;
    core::log_warn("frontier", "ONNX Runtime's reference rows " + skipped);
    return;
  }
  if (fresh) {
    const double ms = (before + eval::measure_latency(base, in, 1, 3, seconds).median_ms) / 2;
    core::write_file_atomic(base_file, nlohmann::json{{"fp32_ms", ms}}.dump() + "\n");
  }
  const double base_ms = nlohmann::json::parse(core::read_file(base_file)).at("fp32_ms").get<double>();
  f.onnxruntime = "onnxruntime " + r->version;
  for (const auto& [precision, metrics, ms] : {std::tuple{"fp32", r->fp32, r->fp32_ms}, {"int8", r->int8, r->int8_ms}}) {
    FrontierPoint p;
    p.method = "onnxruntime", p.precision = precision, p.heads_kept = ctx.total_heads;
    p.metric = 100 * metrics.at(ctx.task->primary_metric);
    p.speedup = base_ms / ms;
    p.speedups[timing_key(batch, seq)] = p.speedup;
    p.reference = true;
    f.points.push_back(p);
  }
}

// Every candidate at every precision, evaluated and timed (or read back from RUN_DIR/state/frontier/), appended to
// f.points; the unpruned fp32 model sets f.baseline. False when stopped.
bool measure_all(const RunContext& ctx, const core::Bert& base, const std::vector<Candidate>& cands,
                 const std::vector<core::Precision>& precisions, Frontier& f) {
  if (cands.empty()) return true;
  const long batch = ctx.cfg->prune.latency_batch, seq = ctx.curves.latency_seq;
  const std::string dir = ctx.store->dir() + "/state/frontier";
  // fp32 only as the baseline where prune.frontier_precisions leaves it out (not read back either).
  auto wanted = [&](const Candidate& c, core::Precision precision) {
    return precision != core::Precision::kFp32 || c.point.method == "unpruned" || fp32_asked(ctx.cfg->prune);
  };
  auto file_of = [&](const Candidate& c, core::Precision precision) {
    return dir + "/" + c.key + "-" + core::precision_name(precision) + ".json";
  };
  long total = 0, stored = 0;  // those measured before a resume count as done, outside the rate
  for (const auto& c : cands)
    for (const auto precision : precisions)
      if (wanted(c, precision)) ++total, stored += fs::exists(file_of(c, precision));
  core::Progress progress("frontier", total, "candidates", stored);
  long done = stored;
  for (const auto& c : cands) {
    std::optional<core::Bert> slim;  // built once for its precisions, when one is missing
    for (const auto precision : precisions) {
      if (!wanted(c, precision)) continue;
      const std::string file = file_of(c, precision);
      FrontierPoint p;
      const bool measured = !fs::exists(file);
      if (!measured) {
        p = read_point(file);
      } else {
        if (core::dist::stop_requested(ctx.stop)) return false;
        if (!slim) slim = c.build();
        p = measure(ctx, base, *slim, c.point, precision, batch, seq);
        fs::create_directories(dir);
        core::write_file_atomic(file, nlohmann::json(p).dump(2) + "\n");
      }
      add_measured(f, p);  // the unpruned fp32 model sets f.baseline
      if (!measured) continue;
      std::ostringstream line;
      line << frontier_label(p) << ": " << p.metric << ", x" << p.speedup;
      progress.update(++done, line.str());
    }
  }
  progress.finish();
  return true;
}

}  // namespace

std::string frontier_gates_dir(long percent) { return "frontier_gates/" + std::to_string(percent); }

std::optional<Frontier> measure_frontier(RunContext& ctx, CurvesSummary& curves, const MaskGradients& grads) {
  const core::Config& cfg = *ctx.cfg;
  if (core::dist::active())
    throw ConfigError("prune.max_drop times every candidate on one machine: run --max-drop without torchrun or "
                      "srun (one process), or give a budget of your own (--target-flops F) to a data-parallel run");
  auto cands = head_candidates(ctx, curves);
  for (auto& c : budget_candidates(ctx, grads)) cands.push_back(std::move(c));
  const auto precisions = native_precisions(cfg.prune);
  const long batch = cfg.prune.latency_batch, seq = ctx.curves.latency_seq;
  log_stage(5, "frontier",
            std::to_string(cands.size()) + " structures x " + std::to_string(precisions.size()) +
                " precisions, each evaluated and timed at batch " + std::to_string(batch) + " x " +
                std::to_string(seq) + " tokens against the unpruned fp32 model");
  Frontier f;
  f.task = ctx.task->name, f.metric = ctx.task->primary_metric, f.split = cfg.prune.eval_split;
  f.timing = "batch " + std::to_string(batch) + " x " + std::to_string(seq) + " tokens";
  f.max_drop = cfg.prune.max_drop;
  core::Bert base = *ctx.model;
  base.set_precision(core::Precision::kFp32);
  if (!measure_all(ctx, base, cands, precisions, f)) return std::nullopt;
  // The gates at the budgets prune.frontier_gates names (or the cheapest the search left within 2·D), trained once.
  std::vector<Candidate> gated;
  for (const double fraction : frontier_gate_budgets(cfg.prune.frontier_gates, f)) {
    auto c = gates_candidate(ctx, fraction);
    if (!c) return std::nullopt;
    gated.push_back(std::move(*c));
  }
  if (!measure_all(ctx, base, gated, precisions, f)) return std::nullopt;
  add_ort_points(ctx, base, batch, seq, f);
  const auto chosen = choose_within(f.points, f.baseline, f.max_drop);
  f.chosen = chosen ? static_cast<int>(*chosen) : -1;
  core::write_file_atomic(cfg.run.out_dir + "/frontier.csv", frontier_csv(f));
  curves.files.push_back("frontier.csv");
  curves.files.push_back("frontier.svg");
  if (!write_svg_and_png(cfg.run.out_dir + "/frontier.svg", svg_line_chart(frontier_chart(f))).empty())
    curves.files.push_back("frontier.png");
  return f;
}

core::Config chosen_config(const core::Config& cfg, const Frontier& f) {
  HP_CHECK(f.chosen >= 0, "chosen_config: no candidate was chosen");
  const FrontierPoint& p = f.points.at(static_cast<size_t>(f.chosen));
  core::Config c = cfg;
  core::PruneConfig& P = c.prune;
  P.max_drop = 0;
  c.run.precision = p.precision;
  if (p.method == "gates") {  // trained by the frontier in RUN_DIR/frontier_gates_dir(step): stage 5 reads them there
    P.target_flops = p.step / 100.0;
    P.method = "gates";
  } else if (p.method == "unpruned" || p.method == "heads") {
    P.target_heads = p.heads_kept;
    P.method = p.method == "heads" ? p.criterion : "best";
    P.recover_steps = 0;  // the export is the model measured
  } else {
    P.target_flops = p.flops_kept;
    P.method = "kwon";
    P.recover_steps = p.method == "kwon-recovered" ? (P.curve_recover_steps < 0 ? P.recover_steps
                                                                                  : P.curve_recover_steps)
                                                   : 0;
  }
  return c;
}

}  // namespace hp::prune
