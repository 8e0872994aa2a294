// `prune analyze` (see analysis/analyze.h).
#include "analysis/analyze.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include "analysis/attention_pass.h"
#include "analysis/examples.h"
#include "analysis/outputs.h"
#include "analysis/stats.h"
#include "core/data/file_task.h"
#include "core/io/checkpoint.h"
#include "core/data/task_options.h"
#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/model/head_mask.h"
#include "core/base/log.h"
#include "core/io/safetensors_index.h"
#include "core/io/tensor_io.h"
#include "core/kernels/device.h"  // parse_device, gpu_summary
#include "eval/evaluator.h"  // head_mask_tensor
#include "eval/results_schema.h"

namespace hp::analysis {

namespace fs = std::filesystem;

core::Bert random_init_like(const core::Bert& like, uint64_t seed) {
  torch::manual_seed(seed);
  std::map<std::string, torch::Tensor> params;
  for (const auto& [name, t] : like.parameters()) {
    const bool norm = name.find("LayerNorm") != std::string::npos;
    const bool bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    if (norm) params[name] = bias ? torch::zeros_like(t) : torch::ones_like(t);
    else if (bias) params[name] = torch::zeros_like(t);
    else params[name] = torch::randn(t.sizes(), t.options()) * 0.02;
  }
  return core::Bert(like.config(), std::move(params));
}

namespace {

// The pass over `model`, resumed from <out>/state/pass_<name>.bin when present; its forwards (and the no-op
// gradients' backward) on run.device, a copy of the model there, the statistics on the CPU.
PassResult pass(const AnalyzeContext& ctx, const core::Bert& model, const std::string& name, bool noop,
                const std::string& model_id, const torch::Tensor& keep) {
  const torch::Device device = core::parse_device(ctx.cfg->run.device);
  std::optional<core::Bert> there;
  if (device != model.device()) {
    there.emplace(model.to(device));
    core::log_info("analyze", name + ": the forwards on " + device.str() + " (" + core::gpu_summary() + ")");
  }
  PassInput in;
  in.model = there ? &*there : &model;
  in.data = &ctx.inputs.data;
  in.info = &ctx.inputs.info;
  in.keep = keep;
  in.batch_size = ctx.cfg->analysis.batch_size;
  in.max_len = ctx.cfg->data.max_seq_len;
  in.noop = noop;
  in.regression = ctx.task->is_regression();
  in.tag = "analyze:" + name;
  in.checkpoint = ctx.out + "/state/pass_" + name + ".bin";
  in.fingerprint = ctx.settings.dump() + "|" + model_id + "|" + std::to_string(noop);
  return run_pass(in);
}

std::string model_id(const std::string& dir) {
  std::string id = fs::absolute(dir).lexically_normal().string();
  std::error_code ec;
  for (const auto& f : core::weights_files(dir))  // model.safetensors, a sharded checkpoint's files or the .bin
    id += "|" + std::to_string(fs::file_size(f, ec)) + "|" +
          std::to_string(fs::last_write_time(f, ec).time_since_epoch().count());
  return id;
}

// Per-head changes B − A of every statistic, roles gained and lost (Holm), change by layer. Heads absent
// from B (NaN) count in neither. The deltas also go to h5 under <h5_prefix>/delta/<statistic>.
nlohmann::json compare_json(const Analysis& a, const Analysis& b, std::map<std::string, Grid>& h5,
                            const std::string& h5_prefix) {
  nlohmann::json j;
  for (const auto& [k, ga] : a.stats) {
    const Grid& gb = b.stats.at(k);
    Grid d = ga;
    std::vector<double> by_layer;
    for (size_t l = 0; l < d.size(); ++l) {
      double s = 0;
      int c = 0;
      for (size_t h = 0; h < d[l].size(); ++h) {
        d[l][h] = gb[l][h] - ga[l][h];
        if (!std::isnan(d[l][h])) s += std::abs(d[l][h]), ++c;
      }
      by_layer.push_back(c ? s / c : NAN);
    }
    j["delta"][k] = grid_json(d);
    j["mean_abs_delta_by_layer"][k] = by_layer;
    h5[h5_prefix + "/delta/" + k] = d;
  }
  for (const auto& [role, fa] : a.roles) {
    if (!b.roles.count(role)) continue;
    const Grid& fb = b.roles.at(role).holm;
    nlohmann::json gained = nlohmann::json::array(), lost = nlohmann::json::array();
    for (size_t l = 0; l < fa.holm.size(); ++l)
      for (size_t h = 0; h < fa.holm[l].size(); ++h) {
        if (fa.holm[l][h] == 0.0 && fb[l][h] == 1.0) gained.push_back({l, h});
        if (fa.holm[l][h] == 1.0 && fb[l][h] == 0.0) lost.push_back({l, h});
      }
    j["roles_gained"][role] = gained;
    j["roles_lost"][role] = lost;
    j["heads_per_role_holm"][role] = {count_role(fa.holm), count_role(fb)};
  }
  return j;
}

// The heads kept at one curve point (mask [L, H]) and, per role, how many of its heads were kept and the
// enrichment p-value of that many among `heads` heads.
nlohmann::json curve_point_json(const Analysis& a, const torch::Tensor& mask, long heads) {
  nlohmann::json pt;
  long kept = 0;
  for (int l = 0; l < a.layers; ++l)
    for (int h = 0; h < a.max_heads; ++h) kept += a.present[l * a.max_heads + h] && mask[l][h].item<double>() > 0.5;
  pt["heads_kept"] = kept;
  for (const auto& [role, f] : a.roles) {
    long with = 0, kept_with = 0;
    for (int l = 0; l < a.layers; ++l)
      for (int h = 0; h < a.max_heads; ++h)
        if (f.holm[l][h] == 1.0) ++with, kept_with += mask[l][h].item<double>() > 0.5;
    pt["roles"][role] = {{"kept", kept_with},
                         {"total", with},
                         {"enrichment_p", with > 0 && kept > 0 ? hypergeom_sf(kept_with, heads, with, kept) : NAN}};
  }
  return pt;
}

// Spearman of each criterion's importance with each statistic; role make-up and enrichment of the kept
// heads at every curve point (DEFINITIONS §8).
nlohmann::json prune_run_json(const std::string& run_dir, const Analysis& a) {
  const std::string path = run_dir + "/run.h5";
  if (!fs::exists(path))
    throw InputError(
        path + ": not found; --prune-run takes the folder of a finished pruning run (prune --config ... --out DIR)");
  const auto t = core::read_hdf5(path);
  nlohmann::json j;
  auto flat = [&](const Grid& g) {
    std::vector<double> v;
    for (const auto& row : g) v.insert(v.end(), row.begin(), row.end());
    return v;
  };
  std::map<std::string, std::vector<double>> stats;
  for (const auto& [k, g] : a.stats) stats[k] = flat(g);
  for (const auto& [role, s] : a.sieve) stats["sieve_" + role] = flat(s.mean);
  const long heads = static_cast<long>(std::count(a.present.begin(), a.present.end(), 1));
  for (const auto& [key, value] : t) {
    const auto parts = eval::results::parse_key(key);
    if (parts && parts->kind == eval::results::Dataset::kImportance) {
      const std::string& crit = parts->criterion;
      if (value.size(0) != a.layers || value.size(1) != a.max_heads)
        throw InputError(path + ": " + key + " is [" + std::to_string(value.size(0)) + ", " +
                         std::to_string(value.size(1)) + "] but the analysed model has " + std::to_string(a.layers) +
                         " x " + std::to_string(a.max_heads) +
                         " heads; analyse the model that run pruned (its model.path)");
      auto imp = value.to(torch::kFloat64).contiguous();
      std::vector<double> v(imp.data_ptr<double>(), imp.data_ptr<double>() + imp.numel());
      for (const auto& [name, s] : stats) j["spearman"][crit][name] = spearman(v, s);
    }
    if (parts && parts->kind == eval::results::Dataset::kMasks) {  // [points, L, H]
      auto m = value.to(torch::kFloat64).contiguous();
      nlohmann::json points = nlohmann::json::array();
      for (int64_t p = 0; p < m.size(0); ++p) points.push_back(curve_point_json(a, m[p], heads));
      j["curve_points"][parts->criterion + "/seed" + std::to_string(parts->seed)] = points;
    }
  }
  if (!j.contains("spearman"))
    throw InputError(
        path + ": holds no importance/<criterion> datasets; is it a pruning run's run.h5 (not a training run's)?");
  return j;
}

// The grids of a slimmed model's analysis placed at its heads' original indices (config.pruned_heads) in
// an [L][max_heads] grid; removed heads are NaN. Only what compare_json reads is mapped.
Analysis at_original_heads(const Analysis& slim, const core::BertConfig& cfg, int max_heads) {
  Analysis out;
  out.layers = slim.layers, out.max_heads = max_heads;
  auto map_grid = [&](const Grid& g) {
    Grid m(slim.layers, std::vector<double>(max_heads, NAN));
    for (int l = 0; l < slim.layers; ++l) {
      const auto kept = cfg.kept_heads(l);
      for (size_t i = 0; i < kept.size(); ++i) m[l][kept[i]] = g[l][i];
    }
    return m;
  };
  for (const auto& [k, g] : slim.stats) out.stats[k] = map_grid(g);
  for (const auto& [role, f] : slim.roles) out.roles[role] = {map_grid(f.raw), map_grid(f.holm), map_grid(f.bh)};
  return out;
}

// Token frequencies for the rare-word role: the task's train split, else the analysed examples.
// `source` says which.
std::vector<int64_t> frequencies(const AnalyzeContext& ctx, const core::Tokenizer& tok,
                                 const std::string& root, const std::vector<core::Example>& fallback,
                                 std::string& source) {
  const auto splits = ctx.task->split_names();
  if (std::find(splits.begin(), splits.end(), "train") != splits.end()) {
    source = ctx.task->name + "/train";
    return token_counts(tok, core::read_task(*ctx.task, root, "train"), ctx.cfg->data.max_seq_len);
  }
  source = "the analysed examples (" + ctx.task->name + " has no train split)";
  return token_counts(tok, fallback, ctx.cfg->data.max_seq_len);
}

// analysis.compare, checked to have model.path's shape.
void load_compared(AnalyzeContext& ctx, const core::LoadOptions& load) {
  const auto& ac = ctx.cfg->analysis;
  const auto& mc = ctx.model->config();
  ctx.other.emplace(core::load_bert(ac.compare, load, &ctx.other_report));
  const auto& oc = ctx.other->config();
  if (oc.num_hidden_layers != mc.num_hidden_layers || oc.max_heads() != mc.max_heads())
    throw ConfigError("analysis.compare = " + ac.compare + ": " + std::to_string(oc.num_hidden_layers) + " layers x " +
                      std::to_string(oc.max_heads()) + " heads, but " + ctx.cfg->model.path + " has " +
                      std::to_string(mc.num_hidden_layers) + " x " + std::to_string(mc.max_heads()) +
                      "; compare models of the same shape (e.g. pretrained vs fine-tuned)");
}

// analysis.prune_run's run.h5 must exist; its slimmed export, when the run made one, must come from a
// model of model.path's shape.
void load_prune_run(AnalyzeContext& ctx, const core::LoadOptions& load) {
  const auto& ac = ctx.cfg->analysis;
  const auto& mc = ctx.model->config();
  if (!fs::exists(ac.prune_run + "/run.h5"))
    throw InputError(ac.prune_run + "/run.h5: not found; --prune-run takes the folder of a finished pruning run");
  if (!fs::exists(ctx.slim_dir + "/config.json")) return;
  ctx.slim.emplace(core::load_bert(ctx.slim_dir, load));
  const auto& sc = ctx.slim->config();
  if (sc.num_hidden_layers != mc.num_hidden_layers || sc.num_attention_heads != mc.max_heads())
    throw InputError(ctx.slim_dir + ": " + std::to_string(sc.num_hidden_layers) + " layers of originally " +
                     std::to_string(sc.num_attention_heads) + " heads, but " + ctx.cfg->model.path + " has " +
                     std::to_string(mc.num_hidden_layers) + " x " + std::to_string(mc.max_heads()) +
                     "; analyse the model that run pruned (its finetune/best)");
}

// The examples analysed (the first analysis.examples rows of analysis.split, or the treebank) with the
// token frequencies; `freq_source` says where the frequencies come from.
void read_inputs(AnalyzeContext& ctx, const core::Tokenizer& tok, std::string& freq_source) {
  const auto& ac = ctx.cfg->analysis;
  const int max_len = ctx.cfg->data.max_seq_len;
  const std::string root = core::data_root_for(ctx.cfg->data);
  std::vector<core::Example> rows;
  if (ac.syntax.empty()) {
    rows = core::read_task(*ctx.task, root, ac.split);
    if (ac.examples > 0 && rows.size() > static_cast<size_t>(ac.examples)) rows.resize(ac.examples);
  }
  const auto counts = frequencies(ctx, tok, root, rows, freq_source);
  ctx.inputs = ac.syntax.empty() ? task_inputs(tok, rows, 0, max_len, counts,
                                               ctx.task->name + "/" + ac.split + ": first " +
                                                   std::to_string(rows.size()) + " rows in file order")
                                 : treebank_inputs(tok, ac.syntax, max_len, counts);
  if (ctx.inputs.info.empty())
    throw InputError(ctx.inputs.source + ": no examples to analyse; check --split / --examples");
}

// Clark's no-op gradients need gold labels and a trained classifier.
// Whether a model gets them, and the note that says why not.
bool noop_for(const AnalyzeContext& ctx, const core::LoadReport& r, std::string& note) {
  const auto& ac = ctx.cfg->analysis;
  if (!ac.syntax.empty()) note = "skipped: a treebank has no task labels";
  else if (!ctx.inputs.data.has_labels) note = "skipped: " + ac.split + " has no labels";
  else if (r.classifier_initialized) note = "skipped: the model has no classifier for " + ctx.task->name;
  else if (!ac.noop) note = "off (analysis.noop = false)";
  else return true;
  return false;
}

// Of the analysed model's role heads (Holm), how many the slimmed export `b` kept.
nlohmann::json roles_kept(const Analysis& a, const Analysis& b) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [role, f] : a.roles) {
    if (!b.roles.count(role)) continue;
    long total = 0, kept = 0;
    for (int l = 0; l < a.layers; ++l)
      for (int h = 0; h < a.max_heads; ++h)
        if (f.holm[l][h] == 1.0) ++total, kept += !std::isnan(b.roles.at(role).holm[l][h]);
    j[role] = {{"kept", kept}, {"total", total}};
  }
  return j;
}

}  // namespace

void prepare_analyze(AnalyzeContext& ctx, const core::Config& cfg) {
  const auto& ac = cfg.analysis;
  ctx.cfg = &cfg;
  ctx.task = &core::task_of(cfg.data, cfg.model.path);
  if (ctx.task->head == core::Head::kToken)
    throw ConfigError("prune analyze reads a sequence classifier's gradients; " + cfg.data.train_file +
                      " is token classification (data.task_type), which it does not read yet");
  ctx.out = ac.out.empty() ? cfg.run.out_dir + "/analysis" : ac.out;
  ctx.roles.tau = ac.tau, ctx.roles.alpha = ac.alpha, ctx.roles.min_occurrences = ac.min_occurrences;
  ctx.slim_dir = ac.prune_run + "/model";  // the run's slimmed export, when it made one

  const core::LoadOptions load = core::task_load_options(*ctx.task, cfg.run.seed);
  ctx.model.emplace(core::load_bert(cfg.model.path, load, &ctx.report));
  core::check_max_seq_len(ctx.model->config(), cfg.data.max_seq_len);
  const auto& mc = ctx.model->config();
  const auto tok = core::Tokenizer::from_model_dir(cfg.model.path);
  const core::HeadSet keep = core::parse_head_mask(ac.mask, mc.num_hidden_layers, mc.max_heads(), "analysis.mask");
  ctx.keep = eval::head_mask_tensor(keep);
  if (!ac.compare.empty()) load_compared(ctx, load);
  if (!ac.prune_run.empty()) load_prune_run(ctx, load);

  std::string freq_source;
  read_inputs(ctx, tok, freq_source);
  ctx.settings = {{"model", cfg.model.path},
                  {"task", ctx.task->name},
                  {"split", ac.syntax.empty() ? ac.split : ""},
                  {"syntax", ac.syntax},
                  {"examples", ctx.inputs.info.size()},
                  {"mask", core::format_head_mask(keep)},
                  {"tau", ac.tau},
                  {"alpha", ac.alpha},
                  {"min_occurrences", ac.min_occurrences},
                  {"max_seq_len", cfg.data.max_seq_len},
                  {"seed", cfg.run.seed},
                  {"source", ctx.inputs.source},
                  {"rare_source", freq_source},
                  {"skipped_sentences", ctx.inputs.skipped}};
  ctx.noop = noop_for(ctx, ctx.report, ctx.noop_note);
}

void analyse_model(AnalyzeContext& ctx) {
  const auto& mc = ctx.model->config();
  core::log_info("analyze", ctx.inputs.source + ": " + std::to_string(ctx.inputs.info.size()) + " examples, " +
                                std::to_string(mc.num_hidden_layers) + " x " + std::to_string(mc.max_heads()) +
                                " heads -> " + ctx.out);
  ctx.main_pass = pass(ctx, *ctx.model, "model", ctx.noop, model_id(ctx.cfg->model.path), ctx.keep);
  ctx.analysis = summarize(ctx.main_pass, ctx.roles);
  ctx.analysis.noop_note = ctx.noop_note;
  ctx.json = analysis_json(ctx.analysis);
  ctx.json["settings"] = ctx.settings;
  ctx.json["seconds"] = ctx.main_pass.seconds;
}

void bootstrap_stability(AnalyzeContext& ctx) {
  const int resamples = ctx.cfg->analysis.resamples;
  core::log_info("analyze", "bootstrap: " + std::to_string(resamples) + " resamples of the examples");
  for (const auto& [role, g] :
       role_stability(ctx.main_pass, resamples, static_cast<unsigned>(ctx.cfg->run.seed), ctx.roles)) {
    ctx.json["stability"][role] = grid_json(g);
    ctx.h5_extra["stability/" + role] = g;
  }
}

void compare_models(AnalyzeContext& ctx) {
  const std::string& dir = ctx.cfg->analysis.compare;
  std::string note;
  const bool noop = noop_for(ctx, ctx.other_report, note);
  Analysis b = summarize(pass(ctx, *ctx.other, "compare", noop, model_id(dir), ctx.keep), ctx.roles);
  b.noop_note = note;
  auto& jc = ctx.json["compare"];
  jc = compare_json(ctx.analysis, b, ctx.h5_extra, "compare");
  jc["model"] = dir;
  const auto bj = analysis_json(b);
  for (const char* k : {"summary", "noop", "noop_note", "syntax"})
    if (bj.contains(k)) jc[k] = bj[k];
}

void random_init_control(AnalyzeContext& ctx) {
  const int seed = ctx.cfg->run.seed;
  const core::Bert control = random_init_like(*ctx.model, static_cast<uint64_t>(seed));
  const Analysis c =
      summarize(pass(ctx, control, "control", false, "random-init|" + std::to_string(seed), ctx.keep), ctx.roles);
  ctx.json["control"]["summary"] = analysis_json(c)["summary"];
  for (const auto& [role, f] : c.roles) {
    ctx.json["control"]["roles"][role] = grid_json(f.holm);
    ctx.h5_extra["control/roles/" + role] = f.holm;
  }
}

void relate_prune_run(AnalyzeContext& ctx) {
  auto& jp = ctx.json["prune_run"];
  jp = prune_run_json(ctx.cfg->analysis.prune_run, ctx.analysis);
  if (!ctx.slim) {
    jp["slim_model"] = "none: " + ctx.slim_dir + " does not exist (the run had no --target-heads)";
    return;
  }
  // The exported slimmed model (after recovery) on the same examples, all its heads analysed, placed at
  // their original indices.
  const auto& sc = ctx.slim->config();
  const Analysis b = at_original_heads(
      summarize(pass(ctx, *ctx.slim, "slim", ctx.noop, model_id(ctx.slim_dir), torch::Tensor()), ctx.roles), sc,
      ctx.model->config().max_heads());
  auto& js = jp["slim_model"];
  js = compare_json(ctx.analysis, b, ctx.h5_extra, "prune_run/slim");
  js["model"] = ctx.slim_dir;
  js["against"] = ctx.cfg->model.path;
  js["heads"] = sc.total_heads();
  js["roles_kept"] = roles_kept(ctx.analysis, b);
}

void write_analysis(const AnalyzeContext& ctx) {
  fs::create_directories(ctx.out);
  core::write_file_atomic(ctx.out + "/analysis.json", ctx.json.dump(1) + "\n");
  write_analysis_h5(ctx.out + "/analysis.h5", ctx.analysis, ctx.h5_extra, ctx.settings.dump());
  core::write_file_atomic(ctx.out + "/roles.csv", roles_csv(ctx.analysis));
  const auto plots = write_plots(ctx.out, ctx.analysis);
  core::log_info("analyze", "wrote analysis.json, analysis.h5, roles.csv and " + std::to_string(plots.size()) +
                                " plots to " + ctx.out);
}

}  // namespace hp::analysis
