// The pruning run (see prune/pipeline.h).
#include "prune/pipeline.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/data/batching.h"
#include "core/base/version.h"
#include "core/io/checkpoint.h"
#include "core/data/task_options.h"
#include "core/dist/distributed.h"
#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/process.h"
#include "core/base/log.h"
#include "core/io/tensor_io.h"
#include "eval/evaluator.h"
#include "eval/flops.h"
#include "eval/latency.h"
#include "prune/criteria.h"
#include "prune/curves.h"
#include "prune/model_card.h"
#include "prune/report.h"
#include "prune/schedule.h"
#include "prune/slim.h"
#include "train/task_run.h"

namespace hp::prune {

namespace fs = std::filesystem;
using nlohmann::json;

void validate_prune_config(const core::PruneConfig& p, const core::BertConfig& arch) {
  const int total = arch.total_heads();
  for (const auto& c : p.criteria) {
    find_criterion(c);
    if (c == "gates") gates_log_alpha(p.gates_run);  // the gated run must exist before anything starts
  }
  schedule_counts(p.schedule, p.schedule_unit, total);
  auto need = [](bool ok, const std::string& msg) {
    if (!ok) throw ConfigError(msg);
  };
  need(p.target_heads >= 0 && p.target_heads <= total,
       "prune.target_heads = " + std::to_string(p.target_heads) + " but the model has " + std::to_string(total) +
           " heads; use 1.." + std::to_string(total) + " (or 0 for curves only)");
  need(p.rank_examples >= 0, "prune.rank_examples = " + std::to_string(p.rank_examples) + "; use 0 (all) or a positive count");
  need(p.rank_batch_size >= 1, "prune.rank_batch_size must be positive");
  need(p.seeds >= 1, "prune.seeds = " + std::to_string(p.seeds) + "; use 1 or more");
  need(p.bootstrap >= 0, "prune.bootstrap = " + std::to_string(p.bootstrap) + "; use 0 (off) or a positive count");
  need(p.attattr_steps >= 1, "prune.attattr_steps = " + std::to_string(p.attattr_steps) + "; use 1 or more (paper: 20)");
  riemann_alphas(1, p.attattr_riemann);
  need(p.attattr_target == "gold" || p.attattr_target == "predicted",
       "prune.attattr_target = '" + p.attattr_target + "'; use gold or predicted");
  need(p.min_heads_per_layer >= 0 && p.min_heads_per_layer <= arch.num_attention_heads,
       "prune.min_heads_per_layer = " + std::to_string(p.min_heads_per_layer) + "; use 0.." +
           std::to_string(arch.num_attention_heads));
  need(p.recover_steps >= 0, "prune.recover_steps must be 0 (off) or positive");
  if (p.method != "best" && p.method != "gates") find_criterion(p.method, "prune.method");
  if (p.target_heads > 0) {
    const int reachable = total - max_prunable(all_heads(arch), p.min_heads_per_layer);
    need(p.target_heads >= reachable, "prune.target_heads = " + std::to_string(p.target_heads) +
                                          " is below the " + std::to_string(reachable) +
                                          " heads prune.min_heads_per_layer keeps; raise it or lower that minimum");
  }
}

namespace {

// Ranking examples for a seed: a seeded shuffle of the rank split, first N.
std::vector<core::Example> rank_examples(std::vector<core::Example> all, int n, int seed) {
  std::mt19937_64 gen(static_cast<uint64_t>(seed) * 1000003ULL + 11);
  for (size_t i = all.size(); i > 1; --i) std::swap(all[i - 1], all[std::uniform_int_distribution<size_t>(0, i - 1)(gen)]);
  if (n > 0 && static_cast<size_t>(n) < all.size()) all.resize(n);
  return all;
}

// Stage 1: a model fine-tuned on the task (the configured one, or RUN_DIR/finetune/best).
std::string finetuned_model(const core::Config& cfg, const core::TaskSpec& task, const std::atomic<bool>* stop,
                            bool& interrupted) {
  core::LoadOptions lo = core::task_load_options(task, cfg.run.seed);
  core::LoadReport rep;
  core::load_bert(cfg.model.path, lo, &rep);
  if (!rep.classifier_initialized) return cfg.model.path;
  if (!cfg.prune.finetune)
    throw ConfigError(cfg.model.path + " has no classifier for " + task.name +
                      "; set prune.finetune: true (fine-tune first) or point model.path at a fine-tuned model");
  const std::string dir = cfg.run.out_dir + "/finetune";
  if (fs::exists(dir + "/train_result.json")) return dir + "/best";
  core::log_info("prune", "stage 1: fine-tuning " + cfg.model.path + " on " + task.name + " into " + dir);
  train::TaskRun run;
  run.model_dir = cfg.model.path;
  run.run_dir = dir;
  run.resume = fs::exists(dir + "/state");
  run.stop = stop;
  core::Config c = cfg;
  c.gates = core::GateConfig{};  // plain fine-tuning
  interrupted = train::train_task(c, run).interrupted;
  return dir + "/best";
}

struct Final {
  std::string method, criterion, model_dir;
  core::HeadSet keep;
  std::map<std::string, double> metrics_before_recovery;
};

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

}  // namespace

int run_pruning(const core::Config& cfg, const std::atomic<bool>* stop) {
  const core::PruneConfig& P = cfg.prune;
  const core::TaskSpec& task = core::find_task(cfg.data.task);
  const core::BertConfig arch = core::read_bert_config(cfg.model.path + "/config.json");
  validate_prune_config(P, arch);
  core::check_max_seq_len(arch, cfg.data.max_seq_len);
  const int total = arch.total_heads();
  // Read the data before claiming the output folder: a task without data fails with nothing written.
  for (const auto& [key, split] : {std::pair<std::string, std::string>{"prune.eval_split", P.eval_split},
                                   {"prune.rank_split", P.rank_split}}) {
    const auto names = task.split_names();
    if (std::find(names.begin(), names.end(), split) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw ConfigError(key + " = '" + split + "' is not a split of " + task.name + "; use one of " + list);
    }
  }
  const std::string root = core::resolve_data_root(cfg.data.root);
  auto eval_examples = core::read_task(task, root, P.eval_split);
  auto rank_all = core::read_task(task, root, P.rank_split);
  if (P.rank_split == P.eval_split)
    core::log_warn("prune", "prune.rank_split = eval_split = " + P.eval_split + ": heads are ranked on the data the curves report");
  if (task.name == "mnli_subset")
    core::log_info("prune", "mnli_subset: our own split of TextFooler's MNLI dev subset (" + P.rank_split + " ranks, " +
                                P.eval_split + " evaluates); the full GLUE MNLI is not on this machine");

  core::Config fixed = cfg;
  fixed.run.out_dir.clear();
  fixed.train.resume.clear();
  fixed.prune.latency = false;  // measuring or not does not change results
  fixed.run.dist_timeout_s = core::RunConfig{}.dist_timeout_s;  // how long ranks wait changes no result
  const std::string config_yaml = core::dump_yaml(fixed);
  RunStore store(cfg.run.out_dir, config_yaml);
  core::write_file_atomic(cfg.run.out_dir + "/config.resolved.yaml", core::dump_yaml(cfg));
  if (store.resumed()) core::log_info("prune", "resuming the run in " + cfg.run.out_dir);

  bool interrupted = false;
  const std::string model_dir = finetuned_model(cfg, task, stop, interrupted);
  if (interrupted) return 130;

  core::LoadOptions lo = core::task_load_options(task, cfg.run.seed);
  const core::Bert model = core::load_bert(model_dir, lo);
  auto tok = core::WordPieceTokenizer::from_model_dir(model_dir);
  const auto eval_data = core::encode_examples(tok, eval_examples, cfg.data.max_seq_len);
  if (!eval_data.has_labels) throw ConfigError("prune.eval_split = " + P.eval_split + " has no labels; use a labelled split (dev)");

  CurveInputs ci;
  ci.model = &model;
  ci.task = &task;
  ci.eval = &eval_data;
  core::BatchOptions bo;
  bo.batch_size = cfg.eval.batch_size;
  bo.pad_id = tok.pad_id();
  ci.eval_batches = core::make_batches(eval_data, bo);
  ci.opts = &P;
  ci.counts = schedule_counts(P.schedule, P.schedule_unit, total);
  ci.latency_seq = cfg.data.max_seq_len;
  ci.stop = stop;

  std::vector<core::EncodedDataset> rank_sets;
  std::vector<RankData> ranks;
  rank_sets.reserve(P.seeds);
  for (int s = 0; s < P.seeds; ++s)
    rank_sets.push_back(core::encode_examples(tok, rank_examples(rank_all, P.rank_examples, cfg.run.seed + s), cfg.data.max_seq_len));
  for (int s = 0; s < P.seeds; ++s) ranks.push_back(make_rank_data(task, rank_sets[s], P.rank_batch_size, tok.pad_id()));

  // Stage 2: curves.
  CurveReport report;
  report.run_dir = cfg.run.out_dir;
  report.config_yaml = core::dump_yaml(cfg);
  report.task = &task;
  report.total_heads = total;
  for (const auto& name : P.criteria) {
    const Criterion& crit = find_criterion(name);
    for (int s = 0; s < P.seeds; ++s) {
      if (core::dist::stop_requested(stop)) return 130;
      auto pts = run_curve(ci, crit, cfg.run.seed + s, ranks[s], store);
      if (core::dist::stop_requested(stop)) return 130;
      report.points.insert(report.points.end(), pts.begin(), pts.end());
    }
    report.importance[name] = *store.load_importance(name, cfg.run.seed, 0);
  }
  report.aggregates = aggregate(report.points, task, eval_data.labels, P.bootstrap, cfg.run.seed);
  auto files = write_curve_report(report);
  const auto fractions = largest_fraction_within(report.aggregates, total, 0.01);
  const auto areas = curve_area(report.aggregates);

  json summary;
  summary["task"] = task.name;
  summary["model"] = cfg.model.path;
  summary["finetuned_model"] = model_dir;
  summary["metric"] = task.primary_metric;
  summary["heads_total"] = total;
  summary["eval_split"] = P.eval_split;
  summary["rank_split"] = P.rank_split;
  summary["rank_examples"] = rank_sets[0].size();
  for (const auto& [c, f] : fractions) summary["criteria"][c]["largest_fraction_pruned_within_1_point"] = f;
  for (const auto& [c, a] : areas) summary["criteria"][c]["mean_metric_over_schedule"] = a;
  for (const auto& a : report.aggregates)
    summary["criteria"][a.criterion]["curve"].push_back({{"heads_pruned", a.pruned}, {"mean", a.mean}, {"ci_lo", a.lo}, {"ci_hi", a.hi}});
  for (const auto& [c, f] : fractions)
    core::log_info("prune", c + ": prunes up to " + std::to_string(static_cast<int>(f * 100 + 0.5)) +
                                "% of heads within 1 point of " + task.primary_metric + " (mean " +
                                std::to_string(areas.at(c)) + " over the schedule)");

  if (P.target_heads > 0) {
    // Stage 3: exactly N heads.
    const int N = P.target_heads;
    Final fin;
    if (P.method == "gates") {
      fin.method = "gates";
      const std::string dir = cfg.run.out_dir + "/gates";
      core::Config c = cfg;
      c.gates.target_heads = N;
      if (!fs::exists(dir + "/train_result.json")) {
        core::log_info("prune", "stage 3: Hard-Concrete gates in target mode to " + std::to_string(N) + " heads");
        train::TaskRun run;
        run.model_dir = model_dir;
        run.run_dir = dir;
        run.resume = fs::exists(dir + "/state");
        run.stop = stop;
        if (train::train_task(c, run).interrupted) return 130;
      }
      json tr = json::parse(core::read_file(dir + "/train_result.json"));
      fin.keep = core::parse_head_mask(tr.at("mask").get<std::string>(), arch.num_hidden_layers, arch.max_heads());
      fin.model_dir = dir + "/best";
    } else {
      std::string best = P.method;
      if (best == "best") {
        double top = -1e300;
        for (const auto& [c, a] : areas)
          if (c != "random" && a > top) top = a, best = c;
        if (best == "best") best = "taylor";
      }
      fin.method = "criterion";
      fin.criterion = best;
      fin.keep = mask_for_count(ci, find_criterion(best), cfg.run.seed, ranks[0], store, total - N);
      fin.metrics_before_recovery =
          eval::evaluate(model, task, eval_data, ci.eval_batches, eval::head_mask_tensor(fin.keep)).metrics;
      core::log_info("prune", "stage 3: " + std::to_string(N) + " heads by " + best + ": " + task.primary_metric + " " +
                                  std::to_string(fin.metrics_before_recovery.at(task.primary_metric)) + " before recovery");
      fin.model_dir = model_dir;
      if (P.recover_steps > 0) {
        const std::string dir = cfg.run.out_dir + "/recover";
        if (!fs::exists(dir + "/train_result.json")) {
          core::Config c = cfg;
          c.gates = core::GateConfig{};
          c.gates.distill = P.recover_distill;
          c.gates.distill_weight = cfg.gates.distill_weight;
          c.gates.distill_temperature = cfg.gates.distill_temperature;
          c.train.max_steps = P.recover_steps;
          c.train.eval_every = std::max(1, P.recover_steps / 2);
          train::TaskRun run;
          run.model_dir = model_dir;
          run.run_dir = dir;
          run.resume = fs::exists(dir + "/state");
          run.fixed_keep = fin.keep;
          run.stop = stop;
          core::log_info("prune", "recovery: " + std::to_string(P.recover_steps) + " fine-tuning steps with the " +
                                      std::to_string(N) + " heads fixed" + (P.recover_distill ? ", distilling" : ""));
          if (train::train_task(c, run).interrupted) return 130;
        }
        fin.model_dir = dir + "/best";
      }
    }
    if (core::count_kept(fin.keep) != N)
      throw InternalError("the final mask keeps " + std::to_string(core::count_kept(fin.keep)) + " heads, not " + std::to_string(N));

    // Export, verify, measure.
    const core::Bert masked_model = core::load_bert(fin.model_dir, lo);
    const core::Bert slim = slim_model(masked_model, fin.keep);
    const std::string out_model = cfg.run.out_dir + "/model";
    core::save_bert(slim, out_model, cfg.model.path, /*hdf5=*/true);
    const core::Bert reloaded = core::load_bert(out_model, lo);
    const auto masked_eval = eval::evaluate(masked_model, task, eval_data, ci.eval_batches, eval::head_mask_tensor(fin.keep));
    const auto slim_eval = eval::evaluate(reloaded, task, eval_data, ci.eval_batches, torch::Tensor());
    const double diff = max_abs_diff(masked_eval.logits, slim_eval.logits);
    summary["final"]["slim_vs_masked_max_abs_logit_diff"] = diff;
    if (P.verify && diff > 1e-5)
      throw InternalError("slimmed export differs from the masked model by " + std::to_string(diff) + " (> 1e-5)");
    // Hugging Face loads the export with our logits on every evaluation example: transformers 4 both ways
    // (replaying pruned_heads; through the modeling file), transformers 5 through the modeling file when
    // its optional venv is there (scripts/setup_python.sh --v5).
    json hf = json::object();
    core::shared_write([&] {  // data-parallel: rank 0 checks (the other ranks' summary is never written)
    const std::string script = std::string(HP_SOURCE_DIR) + "/tools/hf_check.py";
    const std::string h5 = cfg.run.out_dir + "/verify_inputs.h5";
    bool inputs_written = false;
    struct HfCheck { const char* name; core::PythonRef python; const char* flag; };
    for (const HfCheck& check : {HfCheck{"transformers4", core::PythonRef::kTransformers4, ""},
                                 HfCheck{"transformers4_remote_code", core::PythonRef::kTransformers4, "--remote-code"},
                                 HfCheck{"transformers5_remote_code", core::PythonRef::kTransformers5, "--remote-code"}}) {
      const std::string py = core::python_reference(check.python);
      if (!P.verify || !fs::exists(py) || !fs::exists(script)) {
        hf[check.name] = P.verify ? "skipped (no Python reference at " + py + ")" : "skipped (verify off)";
        continue;
      }
      if (!inputs_written) {
        inputs_written = true;
        // All evaluation examples in one padded batch, in dataset order, with our slim logits as the reference.
        core::BatchOptions all;
        all.batch_size = static_cast<int>(eval_data.size());
        all.sort_by_length = false;
        all.pad_id = tok.pad_id();
        auto b = core::make_batches(eval_data, all).at(0);
        torch::NoGradGuard no_grad;
        auto logits = reloaded.forward(core::encoder_input(b)).logits;
        core::write_hdf5(h5, {{"input_ids", b.input_ids}, {"attention_mask", b.attention_mask},
                              {"token_type_ids", b.token_type_ids}, {"logits", logits}});
      }
      std::vector<std::string> cmd = {py, script, out_model, h5, "--tol", "1e-4"};
      if (*check.flag) cmd.push_back(check.flag);
      if (core::run_program(cmd) != 0)
        throw InternalError("Hugging Face transformers does not reproduce the slimmed export: " + core::format_command(cmd));
      hf[check.name] = "passed (max |HF - ours| <= 1e-4 on all " + std::to_string(eval_data.size()) + " examples)";
    }
    });
    summary["final"]["hf_check"] = hf;

    std::map<std::string, json> lat;
    // Latency is measured by rank 0 alone: ranks timing at once on one machine would share its cores.
    for (long batch : {1L, 32L}) {
      if (!core::dist::is_main()) break;
      auto in = eval::synthetic_input(arch, batch, cfg.data.max_seq_len);
      const auto base = eval::measure_latency(masked_model, in);
      const auto small = eval::measure_latency(slim, in);
      const double bound = eval::forward_flops(masked_model.config(), batch, cfg.data.max_seq_len) /
                           eval::forward_flops(slim.config(), batch, cfg.data.max_seq_len);
      const double speedup = base.median_ms / small.median_ms;
      lat["batch" + std::to_string(batch)] = {{"seq", cfg.data.max_seq_len}, {"unpruned_ms", base.median_ms},
                                              {"slim_ms", small.median_ms}, {"speedup", speedup},
                                              {"flop_bound", bound}, {"fraction_of_bound", speedup / bound}};
    }
    summary["final"]["latency"] = lat;
    summary["final"]["heads_kept"] = core::count_kept(fin.keep);
    summary["final"]["mask"] = core::format_head_mask(fin.keep);
    summary["final"]["method"] = fin.method;
    if (!fin.criterion.empty()) summary["final"]["criterion"] = fin.criterion;
    summary["final"]["metrics_before_recovery"] = fin.metrics_before_recovery;
    summary["final"]["metrics"] = slim_eval.metrics;
    summary["final"]["model_dir"] = "model";
    summary["final"]["params"] = eval::parameter_count(slim.config());
    summary["final"]["params_unpruned"] = eval::parameter_count(masked_model.config());
    if (core::dist::is_main())
      std::cout << task.name << " " << P.eval_split << ": " << N << "/" << total << " heads (" << fin.method
              << (fin.criterion.empty() ? "" : " " + fin.criterion) << "): " << task.primary_metric << " "
              << slim_eval.metrics.at(task.primary_metric) << "; speedup x" << lat["batch32"]["speedup"].get<double>()
              << " at batch 32 (FLOP bound x" << lat["batch32"]["flop_bound"].get<double>() << "), x"
              << lat["batch1"]["speedup"].get<double>() << " at batch 1; slimmed model in " << out_model << "\n";
    files.push_back("model/");
    CardInputs card{summary, cfg.run.out_dir, cfg.model.path, {}, slim.config().num_attention_heads, core::headprune_version()};
    for (int l = 0; l < slim.config().num_hidden_layers; ++l) card.kept.push_back(slim.config().kept_heads(l));
    core::write_file_atomic(out_model + "/README.md", model_card(card));
  }
  summary["files"] = files;
  core::write_file_atomic(cfg.run.out_dir + "/summary.json", summary.dump(2) + "\n");
  core::log_info("prune", "wrote " + cfg.run.out_dir + "/summary.json and " + std::to_string(files.size()) + " more files");
  return 0;
}

}  // namespace hp::prune
