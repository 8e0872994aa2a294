// Stages 5-8 of the pruning run: choose N heads, recover, export and verify, measure speed (see
// prune/stages/stages.h).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/base/process.h"
#include "core/base/strings.h"
#include "core/base/version.h"
#include "core/dist/distributed.h"
#include "core/io/tensor_io.h"
#include "eval/evaluator.h"
#include "eval/flops.h"
#include "eval/latency.h"
#include "prune/stages/best_step.h"
#include "prune/stages/budget.h"
#include "prune/export/onnx.h"
#include "prune/export/slim.h"
#include "core/model/arch.h"
#include "prune/stages/stages.h"

namespace hp::prune {

namespace fs = std::filesystem;

namespace {

// The budget side of a gated run's train_result.json (gates under prune.target_flops or target_params).
BudgetSummary gated_budget(const nlohmann::json& tr, const core::StructureMask& keep, double mean_length) {
  BudgetSummary b;
  const auto& j = tr.at("budget");
  b.unit = j.at("unit").get<std::string>();
  b.target = j.at("target").get<double>(), b.kept = j.at("kept").get<double>();
  b.mean_length = mean_length;
  describe_structure(keep, b);
  const std::string step = choice_method_name(ChoiceMethod::kGates);  // the gates' one step
  b.metrics_by_step[step] = tr.at("final_metrics").get<std::map<std::string, double>>();
  b.seconds[step] = tr.at("train_seconds").get<double>();
  return b;
}

// Stage 5 by gates: Hard-Concrete gates in target mode (RUN_DIR/gates) to N heads, or under a FLOPs or parameter
// budget to heads, FFN neurons and sublayers (CoFi), which fine-tune the model with the structure fixed themselves.
// Empty when stopped.
std::optional<FinalChoice> choose_by_gates(RunContext& ctx, int n) {
  const core::Config& cfg = *ctx.cfg;
  const std::string dir = cfg.run.out_dir + "/" + kGatesDir;
  const bool budget = cfg.prune.target_flops > 0 || cfg.prune.target_params > 0;
  if (budget) {
    const core::Config c = gates_budget_config(cfg, cfg.prune.target_flops, cfg.prune.target_params);
    if (!train_budget_gates(ctx, c, kGatesDir, 5, "choose")) return std::nullopt;
  } else if (!fs::exists(dir + "/train_result.json")) {
    core::Config c = cfg;
    c.gates.target_heads = n;
    log_stage(5, "choose N", "Hard-Concrete gates in target mode to " + std::to_string(n) + " heads");
    if (!train_in(ctx, c, kGatesDir, ctx.model_dir)) return std::nullopt;
  }
  const auto tr = nlohmann::json::parse(core::read_file(dir + "/train_result.json"));
  FinalChoice choice;
  choice.method = ChoiceMethod::kGates;
  const core::StructureMask keep = gated_mask(ctx, tr);
  choice.keep = keep.heads;
  if (budget) {
    choice.neurons = keep.neurons;
    choice.layers = keep.layers;
    choice.hidden = keep.hidden;
    choice.budget = gated_budget(tr, keep, ctx.objective->mean_length());
  }
  choice.model_dir = dir + "/best";
  return choice;
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

// Some layer of `cfg` keeps no head.
bool headless_layer(const core::BertConfig& cfg) {
  for (int l = 0; l < cfg.num_hidden_layers; ++l)
    if (cfg.heads_in_layer(l) == 0) return true;
  return false;
}

// Every evaluation example in one padded batch, in dataset order, with our slim logits as the reference: the
// input of tools/hf_check.py.
void write_verify_inputs(const RunContext& ctx, const core::Bert& reloaded, const std::string& h5) {
  core::BatchOptions all;
  all.batch_size = static_cast<int>(ctx.eval_data.size());
  all.sort_by_length = false;
  all.pad_id = ctx.tok->pad_id();
  auto b = core::make_batches(ctx.eval_data, all).at(0);
  torch::NoGradGuard no_grad;
  auto logits = reloaded.forward(core::encoder_input(b)).logits;
  core::write_hdf5(h5, {{"input_ids", b.input_ids},
                        {"attention_mask", b.attention_mask},
                        {"token_type_ids", b.token_type_ids},
                        {"logits", logits}});
}

// Why transformers' own class cannot load the export (so only the remote-code checks apply), or "".
std::string own_class_not_applicable(const core::BertConfig& c) {
  if (c.hidden_slimmed())
    return "not applicable (removed hidden channels need the modeling file: see the remote-code checks)";
  if (c.ffn_slimmed())
    return "not applicable (per-layer FFN widths need the modeling file: see the remote-code checks)";
  if (!core::arch_of(c.model_type).hf_runs_headless_layers && c.max_heads() > 0 && headless_layer(c))
    return std::string("not applicable (transformers' ") + core::arch_of(c.model_type).name +
           " cannot run a layer without heads: see the remote-code checks)";
  return "";
}

// The optional transformers 5 check cannot run (`why`): one warning line naming the venv and the fix, and the
// summary's entry. Skipped, never failing the run.
std::string skip_optional_check(const std::string& why) {
  core::log_warn("prune", "stage 7: " + why + "; skipping its Hugging Face check; rerun `scripts/setup.sh --v5`");
  return "skipped (" + why + ")";
}

// Hugging Face loads the export with our logits on every evaluation example: transformers 4 both ways
// (replaying pruned_heads; through the modeling file), transformers 5 through the modeling file when
// its optional venv is there and complete (scripts/setup_python.sh --v5). Rank 0 checks (the other ranks'
// summary is never written).
std::map<std::string, std::string> hf_checks(const RunContext& ctx, const core::Bert& reloaded,
                                             const std::string& out_model) {
  std::map<std::string, std::string> hf;
  const bool verify = ctx.cfg->prune.verify;
  core::shared_write([&] {
    const std::string script = core::source_dir() + "/tools/hf_check.py";
    const std::string h5 = ctx.cfg->run.out_dir + "/verify_inputs.h5";
    bool inputs_written = false;
    struct HfCheck {
      const char* name;
      core::PythonRef python;
      const char* flag;
    };
    for (const HfCheck& check :
         {HfCheck{"transformers4", core::PythonRef::kTransformers4, ""},
          HfCheck{"transformers4_remote_code", core::PythonRef::kTransformers4, "--remote-code"},
          HfCheck{"transformers5_remote_code", core::PythonRef::kTransformers5, "--remote-code"}}) {
      const std::string py = core::python_reference(check.python);
      const bool optional = check.python == core::PythonRef::kTransformers5;
      if (const std::string na = *check.flag ? "" : own_class_not_applicable(reloaded.config()); !na.empty()) {
        hf[check.name] = na;
        continue;
      }
      if (!verify || !fs::exists(py) || !fs::exists(script)) {
        hf[check.name] = verify ? "skipped (no Python reference at " + py + ")" : "skipped (verify off)";
        continue;
      }
      if (const std::string why = core::python_reference_incomplete(py, check.python); !why.empty()) {
        hf[check.name] = skip_optional_check(why);
        continue;
      }
      if (!inputs_written) write_verify_inputs(ctx, reloaded, h5), inputs_written = true;
      std::vector<std::string> cmd = {py, script, out_model, h5, "--tol", core::format_number("%g", kHfLogitTolerance)};
      if (*check.flag) cmd.push_back(check.flag);
      const int rc = core::run_program(cmd);
      const std::string cannot_import =
          "the " + std::string(optional ? "transformers 5 " : "") + "Python reference " + py +
          " cannot import what tools/hf_check.py needs (the line above names the module)";
      if (rc == core::kPythonCannotImport && optional) {
        hf[check.name] = skip_optional_check(cannot_import);
        continue;
      }
      if (rc == core::kPythonCannotImport)
        throw InputError("stage 7: " + cannot_import +
                         "; rerun scripts/setup.sh, or skip the Hugging Face checks with --set prune.verify=false");
      if (rc != 0)
        throw InternalError("Hugging Face transformers does not reproduce the slimmed export: " +
                            core::format_command(cmd));
      hf[check.name] = "passed (max |HF - ours| <= " + tolerance_text(kHfLogitTolerance) + " on all " +
                       std::to_string(ctx.eval_data.size()) + " examples)";
    }
  });
  return hf;
}

}  // namespace

std::string best_criterion(const CurvesSummary& curves, std::string* why) {
  std::string best;
  double top = -std::numeric_limits<double>::infinity();
  for (const auto& [c, a] : curves.select_areas.empty() ? curves.areas : curves.select_areas) {
    // An undefined area (a curve point with constant predictions: Spearman NaN) ranks below every defined one, but a
    // criterion with one is still a criterion: alone, it is the choice.
    const double v = std::isnan(a) ? -std::numeric_limits<double>::infinity() : a;
    if (c != "random" && (best.empty() || v > top)) top = v, best = c;
  }
  if (!best.empty()) return best;
  HP_CHECK(curves.areas.count("random"), "prune.method best: no criterion has a curve");
  *why = " (the only criterion scored, prune.criteria; \"best\" passes over random only beside others)";
  return "random";
}

std::optional<FinalChoice> choose_heads(RunContext& ctx, const CurvesSummary& curves) {
  const core::Config& cfg = *ctx.cfg;
  const int n = cfg.prune.target_heads;
  if (cfg.prune.method == core::MethodKind::kGates) return choose_by_gates(ctx, n);
  FinalChoice choice;
  choice.method = ChoiceMethod::kCriterion;
  std::string why;  // why "best" is random
  choice.criterion = cfg.prune.method == core::MethodKind::kBest ? best_criterion(curves, &why) : core::choice_text(cfg.prune.method);
  choice.keep = mask_for_count(ctx.curves, find_criterion(choice.criterion), cfg.run.seed, ctx.ranks[0], *ctx.store,
                               ctx.total_heads - n);
  choice.metrics_before_recovery =
      ctx.objective->evaluate(*ctx.model, Split::kEval, {eval::head_mask_tensor(choice.keep)}).metrics;
  const std::string& metric = ctx.objective->task().primary_metric;
  log_stage(5, "choose N",
            std::to_string(n) + " heads by " + choice.criterion + why + ": " + metric + " " +
                std::to_string(choice.metrics_before_recovery.at(metric)) + " before recovery");
  choice.model_dir = ctx.model_dir;
  return choice;
}

core::Config recovery_config(const core::Config& cfg, int steps, bool slimmed) {
  core::Config c = cfg;
  c.gates = core::GateConfig{};
  // A slimmed model's recovery distils with the layer term, the word swaps or other tasks' rows, else trains on the
  // labels.
  c.gates.distill = cfg.prune.recover_distill && (!slimmed || cfg.prune.distill_hidden > 0 ||
                                                  cfg.gates.distill_augment > 0 || !cfg.prune.distill_tasks.empty());
  c.gates.distill_weight = cfg.gates.distill_weight;
  c.gates.distill_temperature = cfg.gates.distill_temperature;
  c.gates.distill_hidden = cfg.prune.distill_hidden;
  c.gates.distill_augment = cfg.gates.distill_augment;
  c.train.max_steps = steps;
  c.train.eval_every = std::max(1, steps / 2);
  // Its length is prune.recover_steps alone: train.max_train_examples and train.epochs shape fine-tuning and the
  // gates only.
  c.train.max_train_examples = 0;
  return c;
}

bool recover(RunContext& ctx, FinalChoice& choice) {
  const core::Config& cfg = *ctx.cfg;
  const core::PruneConfig& P = cfg.prune;
  // A budget's choice recovers as the budget curves' point at the same fraction does (prune.recover_scale).
  const int steps =
      choice.method == ChoiceMethod::kKwon && choice.budget ? budget_recover_steps(P, choice.budget->target, false) : P.recover_steps;
  if (choice.method == ChoiceMethod::kGates || steps <= 0) return true;
  const std::string dir = cfg.run.out_dir + "/recover";
  if (!fs::exists(dir + "/train_result.json")) {
    const core::Config c = recovery_config(cfg, steps, choice.slimmed);
    log_stage(6, "recover",
              std::to_string(steps) + " fine-tuning steps " +
                  (choice.slimmed ? std::string("of the slimmed model")
                                  : "with the " + std::to_string(core::count_kept(choice.keep)) + " heads fixed") +
                  // A slimmed model's recovery trains on the labels alone unless prune.distill_hidden,
                  // gates.distill_augment or prune.distill_tasks is set (recovery_config; docs/budgets.md says
                  // what distilling measured).
                  (c.gates.distill ? ", distilling from the unpruned model" : "") +
                  (c.gates.distill && P.distill_hidden > 0 ? " (its logits and each layer's output)" : "") +
                  (c.gates.distill && c.gates.distill_augment > 0 ? ", with word swaps" : "") +
                  (c.gates.distill && !P.distill_tasks.empty() ? ", with prune.distill_tasks' rows" : ""));
    // A slimmed model needs no fixed mask: what was removed is gone; its teacher is the unpruned model.
    if (!train_in(ctx, c, "recover", choice.model_dir, choice.slimmed ? core::HeadSet{} : choice.keep, 0,
                  choice.slimmed && c.gates.distill ? ctx.model_dir : ""))
      return false;
  }
  choice.model_dir = dir + "/best";
  return true;
}

namespace {

// A --max-drop run's ONNX files in `dir` beside the export of `model` (float32 weights): model.onnx, and
// model.int8.onnx when the frontier chose int8, each checked in ONNX Runtime as `prune export --onnx` / `--int8`
// check them (prune/export/onnx.h). Without the reference Python or onnxruntime both are skipped with the reason, as the
// frontier's ONNX Runtime points are; an int8 file that fails its check is not written (the reason logged and
// kept): the export itself, run at int8 by headprune, is what the frontier measured.
OnnxFiles export_onnx_files(const RunContext& ctx, const core::Bert& model, const std::string& dir) {
  OnnxFiles o;
  auto skip = [&](const std::string& why) {
    o.fp32 = "skipped: " + why;
    if (ctx.cfg->run.precision == "int8") o.int8 = o.fp32;
    core::log_warn("export", "model.onnx " + o.fp32);
    return o;
  };
  const std::string py = core::python_reference();
  if (!fs::exists(py)) return skip("no reference Python at " + py + " (scripts/setup.sh makes it)");
  if (const std::string why = core::python_reference_incomplete(py, core::PythonRef::kTransformers4); !why.empty())
    return skip(why);
  try {
    export_onnx(model, dir);
  } catch (const InputError& e) {  // onnxruntime is not installed (the Python was checked above)
    return skip(e.what());
  }
  o.fp32 =
      "checked: ONNX Runtime's logits equal headprune's (max |difference| <= " + tolerance_text(kOnnxTolerance) + ")";
  if (ctx.cfg->run.precision != "int8") return o;
  try {
    const Int8ExportCheck c = export_onnx_int8(model, dir, *ctx.task, ctx.eval_data, ctx.eval_batches);
    o.int8 = "checked: the same prediction on " + core::format_number("%.4g", 100 * c.agreement) + "% of " +
             std::to_string(c.examples) + " examples as headprune's int8 with the same weights (+-" +
             std::to_string(c.weight_max) + ")";
    o.int8_metrics = c.onnx_int8;
  } catch (const InternalError& e) {  // the check failed; export_onnx_int8 left no model.int8.onnx
    o.int8 = std::string("not written: ") + e.what();
    core::log_warn("export", "model.int8.onnx " + o.int8);
  }
  return o;
}

}  // namespace

core::Config gates_budget_config(const core::Config& cfg, double target_flops, double target_params) {
  core::Config c = cfg;
  c.gates.target_flops = target_flops, c.gates.target_params = target_params;
  c.gates.distill = cfg.gates.distill || cfg.prune.recover_distill;
  c.gates.finetune_after = cfg.gates.finetune_after && cfg.prune.recover_steps > 0;
  const auto& st = cfg.prune.structures;
  c.gates.layer_gates = cfg.gates.layer_gates || std::find(st.begin(), st.end(), "layers") != st.end();
  c.gates.hidden_gates = cfg.gates.hidden_gates || std::find(st.begin(), st.end(), "hidden") != st.end();
  return c;
}

core::StructureMask gated_mask(const RunContext& ctx, const nlohmann::json& train_result) {
  return core::parse_mask(train_result.at("mask").get<std::string>(), ctx.arch.num_hidden_layers,
                          ctx.arch.max_heads(), ctx.arch.intermediate_size, "train_result.json's mask",
                          ctx.arch.hidden_size);
}

FinalModels export_and_verify(RunContext& ctx, const FinalChoice& choice, FinalSummary& final) {
  const core::Config& cfg = *ctx.cfg;
  if (cfg.prune.target_heads > 0 && core::count_kept(choice.keep) != cfg.prune.target_heads)
    throw InternalError("the final mask keeps " + std::to_string(core::count_kept(choice.keep)) + " heads, not " +
                        std::to_string(cfg.prune.target_heads));
  FinalModels m;
  m.masked.emplace(core::load_bert(choice.model_dir, ctx.load));
  // A budget's model is slimmed already (stage 5 checked it against masking with the scales).
  m.slim.emplace(choice.slimmed ? *m.masked
                                : slim_model(*m.masked, choice.keep, choice.neurons, choice.layers, choice.hidden));
  const std::string out_model = cfg.run.out_dir + "/model";
  const bool transformers = ctx.objective->export_kind() == ExportKind::kTransformers;
  log_stage(7, "export, verify",
            "the slimmed model to " + out_model + (transformers ? "" : " (a sentence-transformers folder)"));
  ctx.objective->save(*m.slim, out_model, cfg);
  const core::Bert reloaded = ctx.objective->load(out_model, ctx.load);
  const auto masked_eval = ctx.objective->evaluate(
      *m.masked, Split::kEval,
      choice.slimmed ? eval::Masks{} : eval::masks_of({choice.keep, choice.neurons, choice.layers, choice.hidden}));
  const auto slim_eval = ctx.objective->evaluate(reloaded, Split::kEval);
  final.slim_vs_masked_max_abs_logit_diff = max_abs_diff(masked_eval.logits, slim_eval.logits);
  if (cfg.prune.verify && final.slim_vs_masked_max_abs_logit_diff > kSlimLogitTolerance)
    throw InternalError("slimmed export differs from the masked model by " +
                        std::to_string(final.slim_vs_masked_max_abs_logit_diff) + " (> " +
                        core::format_number("%g", kSlimLogitTolerance) + ")");
  if (transformers) final.hf_check = hf_checks(ctx, reloaded, out_model);
  if (transformers && ctx.export_onnx && core::dist::is_main())
    final.onnx = export_onnx_files(ctx, reloaded, out_model);
  final.metrics = slim_eval.metrics;
  if (ctx.curves.precision != core::Precision::kFp32) {
    // The export at the run's precision as `prune eval --precision` runs it (int8 calibrated on run.calibrate
    // examples, as the frontier measured its choice): what a user gets. The fp32 figure beside it.
    core::Bert at = reloaded;  // shares the weights, packs its own
    at.set_precision(ctx.curves.precision);
    eval::calibrate_int8(at, cfg, *ctx.tok);  // int8 only
    final.metrics_fp32 = slim_eval.metrics;
    final.metrics = ctx.objective->evaluate(at, Split::kEval).metrics;
  }
  return m;
}

// Seconds each model runs (5 runs at least) in each of the 3 alternating rounds: prune.frontier_time's default.
constexpr double kSpeedSeconds = 0.3;

std::map<std::string, LatencySummary> time_against(const core::Bert& unpruned, const core::Bert& slim, long seq) {
  std::map<std::string, LatencySummary> lat;
  for (long batch : {1L, 32L}) {
    auto in = eval::synthetic_input(unpruned.config(), batch, seq);
    LatencySummary l;
    l.seq = seq;
    l.unpruned_precision = core::precision_name(unpruned.precision());  // as timed
    l.slim_precision = core::precision_name(slim.precision());
    l.flop_bound =
        eval::forward_flops(unpruned.config(), batch, seq) / eval::forward_flops(slim.config(), batch, seq);
    const eval::SideBySide t = eval::time_side_by_side(
        [&] { return eval::measure_latency(unpruned, in, 2, 5, kSpeedSeconds).median_ms; },
        [&] { return eval::measure_latency(slim, in, 2, 5, kSpeedSeconds).median_ms; }, l.flop_bound,
        l.unpruned_precision == l.slim_precision);
    l.unpruned_ms = t.base_ms, l.slim_ms = t.small_ms, l.speedup = t.speedup, l.suspect = t.suspect;
    l.fraction_of_bound = l.speedup / l.flop_bound;
    if (!t.suspect.empty()) core::log_warn("prune", "speed-up at batch " + std::to_string(batch) + ": " + t.suspect);
    lat["batch" + std::to_string(batch)] = l;
  }
  return lat;
}

std::map<std::string, LatencySummary> measure_speed(const RunContext& ctx, const FinalModels& models) {
  if (!core::dist::is_main()) return {};  // ranks timing at once on one machine would share its cores
  const long seq = ctx.curves.latency_seq;
  // Both at run.precision (the unpruned one at fp32 after the frontier): copies share the weights and pack their own.
  core::Bert unpruned = *ctx.model, slim = *models.slim;
  const core::Precision base_precision = ctx.speed_baseline.value_or(ctx.curves.precision);
  const std::string precisions = base_precision == ctx.curves.precision
                                     ? ""
                                     : std::string(" (") + core::precision_name(ctx.curves.precision) + " against " +
                                           core::precision_name(base_precision) + ")";
  log_stage(8, "measure speed",
            "the slimmed against the unpruned model" + precisions + " at batch 1 and 32, " + std::to_string(seq) +
                " tokens");
  unpruned.set_precision(base_precision);
  slim.set_precision(ctx.curves.precision);
  return time_against(unpruned, slim, seq);
}

}  // namespace hp::prune
