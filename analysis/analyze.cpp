// `prune analyze` (see analysis/analyze.h).
#include "analysis/analyze.h"

#include <cmath>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "analysis/attention_pass.h"
#include "analysis/examples.h"
#include "analysis/outputs.h"
#include "analysis/stats.h"
#include "core/io/checkpoint.h"
#include "core/data/task_options.h"
#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/model/head_mask.h"
#include "core/base/log.h"
#include "core/io/tensor_io.h"
#include "eval/evaluator.h"  // head_mask_tensor

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

struct Setup {
  const core::Config* cfg = nullptr;
  const core::TaskSpec* task = nullptr;
  AnalysisInputs inputs;
  torch::Tensor keep;
  std::string out, settings;
  RoleSettings roles;
};

// The pass over `model`, resumed from <out>/state/pass_<name>.bin when present.
PassResult pass(const Setup& s, const core::Bert& model, const std::string& name, bool noop, const std::string& model_id) {
  PassInput in;
  in.model = &model;
  in.data = &s.inputs.data;
  in.info = &s.inputs.info;
  in.keep = s.keep;
  in.batch_size = s.cfg->analysis.batch_size;
  in.max_len = s.cfg->data.max_seq_len;
  in.noop = noop;
  in.regression = s.task->is_regression();
  in.tag = "analyze:" + name;
  in.checkpoint = s.out + "/state/pass_" + name + ".bin";
  in.fingerprint = s.settings + "|" + model_id + "|" + std::to_string(noop);
  return run_pass(in);
}

std::string model_id(const std::string& dir) {
  std::string id = fs::absolute(dir).lexically_normal().string();
  for (const char* f : {"model.safetensors", "pytorch_model.bin"})
    if (fs::exists(dir + "/" + f)) id += "|" + std::to_string(fs::file_size(dir + "/" + f)) + "|" +
                                         std::to_string(fs::last_write_time(dir + "/" + f).time_since_epoch().count());
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

// Spearman of each criterion's importance with each statistic; role make-up and enrichment of the kept
// heads at every curve point (DEFINITIONS §8).
nlohmann::json prune_run_json(const std::string& run_dir, const Analysis& a) {
  const std::string path = run_dir + "/run.h5";
  if (!fs::exists(path))
    throw InputError(path + ": not found; --prune-run takes the folder of a finished pruning run (prune --config ... --out DIR)");
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
    if (key.rfind("importance/", 0) == 0) {
      const std::string crit = key.substr(11);
      if (value.size(0) != a.layers || value.size(1) != a.max_heads)
        throw InputError(path + ": " + key + " is [" + std::to_string(value.size(0)) + ", " + std::to_string(value.size(1)) +
                         "] but the analysed model has " + std::to_string(a.layers) + " x " + std::to_string(a.max_heads) +
                         " heads; analyse the model that run pruned (its model.path)");
      auto imp = value.to(torch::kFloat64).contiguous();
      std::vector<double> v(imp.data_ptr<double>(), imp.data_ptr<double>() + imp.numel());
      for (const auto& [name, s] : stats) j["spearman"][crit][name] = spearman(v, s);
    }
    if (key.rfind("masks/", 0) == 0) {  // masks/<criterion>/seed<k>: [points, L, H]
      auto m = value.to(torch::kFloat64).contiguous();
      nlohmann::json points = nlohmann::json::array();
      for (int64_t p = 0; p < m.size(0); ++p) {
        nlohmann::json pt;
        long kept = 0;
        for (int l = 0; l < a.layers; ++l)
          for (int h = 0; h < a.max_heads; ++h) kept += a.present[l * a.max_heads + h] && m[p][l][h].item<double>() > 0.5;
        pt["heads_kept"] = kept;
        for (const auto& [role, f] : a.roles) {
          long with = 0, kept_with = 0;
          for (int l = 0; l < a.layers; ++l)
            for (int h = 0; h < a.max_heads; ++h)
              if (f.holm[l][h] == 1.0) ++with, kept_with += m[p][l][h].item<double>() > 0.5;
          pt["roles"][role] = {{"kept", kept_with}, {"total", with},
                               {"enrichment_p", with > 0 && kept > 0 ? hypergeom_sf(kept_with, heads, with, kept) : NAN}};
        }
        points.push_back(pt);
      }
      j["curve_points"][key.substr(6)] = points;
    }
  }
  if (!j.contains("spearman"))
    throw InputError(path + ": holds no importance/<criterion> datasets; is it a pruning run's run.h5 (not a training run's)?");
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

std::vector<int64_t> frequencies(const Setup& s, const core::WordPieceTokenizer& tok, const std::string& root,
                                 const std::vector<core::Example>& fallback, std::string& source) {
  const auto splits = s.task->split_names();
  if (std::find(splits.begin(), splits.end(), "train") != splits.end()) {
    source = s.task->name + "/train";
    return token_counts(tok, core::read_task(*s.task, root, "train"), s.cfg->data.max_seq_len);
  }
  source = "the analysed examples (" + s.task->name + " has no train split)";
  return token_counts(tok, fallback, s.cfg->data.max_seq_len);
}

}  // namespace

int run_analyze(const core::Config& cfg) {
  const auto& ac = cfg.analysis;
  Setup s;
  s.cfg = &cfg;
  s.task = &core::find_task(cfg.data.task);
  s.out = ac.out.empty() ? cfg.run.out_dir + "/analysis" : ac.out;
  s.roles.tau = ac.tau, s.roles.alpha = ac.alpha, s.roles.min_occurrences = ac.min_occurrences;

  core::LoadOptions load = core::task_load_options(*s.task, cfg.run.seed);
  core::LoadReport report;
  core::Bert model = core::load_bert(cfg.model.path, load, &report);
  core::check_max_seq_len(model.config(), cfg.data.max_seq_len);
  const auto& mc = model.config();
  auto tok = core::WordPieceTokenizer::from_model_dir(cfg.model.path);
  core::HeadSet keep = core::parse_head_mask(ac.mask, mc.num_hidden_layers, mc.max_heads(), "analysis.mask");
  s.keep = eval::head_mask_tensor(keep);

  // Load the second model before any work, so a shape mismatch fails at once and writes nothing.
  std::optional<core::Bert> other;
  core::LoadReport other_report;
  if (!ac.compare.empty()) {
    other.emplace(core::load_bert(ac.compare, load, &other_report));
    const auto& oc = other->config();
    if (oc.num_hidden_layers != mc.num_hidden_layers || oc.max_heads() != mc.max_heads())
      throw ConfigError("analysis.compare = " + ac.compare + ": " + std::to_string(oc.num_hidden_layers) + " layers x " +
                        std::to_string(oc.max_heads()) + " heads, but " + cfg.model.path + " has " +
                        std::to_string(mc.num_hidden_layers) + " x " + std::to_string(mc.max_heads()) +
                        "; compare models of the same shape (e.g. pretrained vs fine-tuned)");
  }
  if (!ac.prune_run.empty() && !fs::exists(ac.prune_run + "/run.h5"))
    throw InputError(ac.prune_run + "/run.h5: not found; --prune-run takes the folder of a finished pruning run");
  const std::string slim_dir = ac.prune_run + "/model";  // the run's slimmed export, when it made one
  std::optional<core::Bert> slim;
  if (!ac.prune_run.empty() && fs::exists(slim_dir + "/config.json")) {
    slim.emplace(core::load_bert(slim_dir, load));
    const auto& sc = slim->config();
    if (sc.num_hidden_layers != mc.num_hidden_layers || sc.num_attention_heads != mc.max_heads())
      throw InputError(slim_dir + ": " + std::to_string(sc.num_hidden_layers) + " layers of originally " +
                       std::to_string(sc.num_attention_heads) + " heads, but " + cfg.model.path + " has " +
                       std::to_string(mc.num_hidden_layers) + " x " + std::to_string(mc.max_heads()) +
                       "; analyse the model that run pruned (its finetune/best)");
  }

  const std::string root = core::resolve_data_root(cfg.data.root);
  std::string freq_source;
  std::vector<core::Example> rows;
  if (ac.syntax.empty()) {
    rows = core::read_task(*s.task, root, ac.split);
    if (ac.examples > 0 && rows.size() > static_cast<size_t>(ac.examples)) rows.resize(ac.examples);
  }
  const auto counts = frequencies(s, tok, root, rows, freq_source);
  s.inputs = ac.syntax.empty()
                 ? task_inputs(tok, rows, 0, cfg.data.max_seq_len, counts,
                               s.task->name + "/" + ac.split + ": first " + std::to_string(rows.size()) + " rows in file order")
                 : treebank_inputs(tok, ac.syntax, cfg.data.max_seq_len, counts);
  if (s.inputs.info.empty()) throw InputError(s.inputs.source + ": no examples to analyse; check --split / --examples");

  nlohmann::json settings = {{"model", cfg.model.path}, {"task", s.task->name}, {"split", ac.syntax.empty() ? ac.split : ""},
                             {"syntax", ac.syntax}, {"examples", s.inputs.info.size()}, {"mask", core::format_head_mask(keep)},
                             {"tau", ac.tau}, {"alpha", ac.alpha}, {"min_occurrences", ac.min_occurrences},
                             {"max_seq_len", cfg.data.max_seq_len}, {"seed", cfg.run.seed}, {"source", s.inputs.source},
                             {"rare_source", freq_source}, {"skipped_sentences", s.inputs.skipped}};
  s.settings = settings.dump();

  // Clark's no-op gradients need gold labels and a trained classifier.
  // Whether a model gets them, and the note that says why not.
  auto noop_for = [&](const core::LoadReport& r, std::string& note) {
    if (!ac.syntax.empty()) note = "skipped: a treebank has no task labels";
    else if (!s.inputs.data.has_labels) note = "skipped: " + ac.split + " has no labels";
    else if (r.classifier_initialized) note = "skipped: the model has no classifier for " + s.task->name;
    else if (!ac.noop) note = "off (analysis.noop = false)";
    else return true;
    return false;
  };
  std::string noop_note;
  const bool noop = noop_for(report, noop_note);

  core::log_info("analyze", s.inputs.source + ": " + std::to_string(s.inputs.info.size()) + " examples, " +
                                std::to_string(mc.num_hidden_layers) + " x " + std::to_string(mc.max_heads()) + " heads -> " + s.out);
  PassResult main_pass = pass(s, model, "model", noop, model_id(cfg.model.path));
  Analysis a = summarize(main_pass, s.roles);
  a.noop_note = noop_note;

  nlohmann::json j = analysis_json(a);
  j["settings"] = settings;
  j["seconds"] = main_pass.seconds;
  std::map<std::string, Grid> h5_extra;
  if (ac.resamples > 0) {
    core::log_info("analyze", "bootstrap: " + std::to_string(ac.resamples) + " resamples of the examples");
    for (const auto& [role, g] : role_stability(main_pass, ac.resamples, static_cast<unsigned>(cfg.run.seed), s.roles)) {
      j["stability"][role] = grid_json(g);
      h5_extra["stability/" + role] = g;
    }
  }
  if (other) {
    std::string other_note;
    const bool other_noop = noop_for(other_report, other_note);
    Analysis b = summarize(pass(s, *other, "compare", other_noop, model_id(ac.compare)), s.roles);
    b.noop_note = other_note;
    j["compare"] = compare_json(a, b, h5_extra, "compare");
    j["compare"]["model"] = ac.compare;
    const auto bj = analysis_json(b);
    for (const char* k : {"summary", "noop", "noop_note", "syntax"})
      if (bj.contains(k)) j["compare"][k] = bj[k];
  }
  if (ac.control == "random-init") {
    core::Bert control = random_init_like(model, static_cast<uint64_t>(cfg.run.seed));
    Analysis c = summarize(pass(s, control, "control", false, "random-init|" + std::to_string(cfg.run.seed)), s.roles);
    j["control"]["summary"] = analysis_json(c)["summary"];
    for (const auto& [role, f] : c.roles) {
      j["control"]["roles"][role] = grid_json(f.holm);
      h5_extra["control/roles/" + role] = f.holm;
    }
  }
  if (!ac.prune_run.empty()) {
    j["prune_run"] = prune_run_json(ac.prune_run, a);
    if (slim) {
      // The exported slimmed model (after recovery) on the same examples, its heads at their original indices.
      const auto& sc = slim->config();
      Setup slim_setup = s;
      slim_setup.keep = torch::Tensor();
      const Analysis b = at_original_heads(summarize(pass(slim_setup, *slim, "slim", noop, model_id(slim_dir)), s.roles),
                                           sc, mc.max_heads());
      auto& js = j["prune_run"]["slim_model"];
      js = compare_json(a, b, h5_extra, "prune_run/slim");
      js["model"] = slim_dir;
      js["against"] = cfg.model.path;
      js["heads"] = sc.total_heads();
      js["roles_kept"] = nlohmann::json::object();
      for (const auto& [role, f] : a.roles) {  // of the analysed model's role heads, how many the export kept
        if (!b.roles.count(role)) continue;
        long total = 0, kept = 0;
        for (int l = 0; l < a.layers; ++l)
          for (int h = 0; h < a.max_heads; ++h)
            if (f.holm[l][h] == 1.0) ++total, kept += !std::isnan(b.roles.at(role).holm[l][h]);
        js["roles_kept"][role] = {{"kept", kept}, {"total", total}};
      }
    } else {
      j["prune_run"]["slim_model"] = "none: " + slim_dir + " does not exist (the run had no --target-heads)";
    }
  }

  fs::create_directories(s.out);
  core::write_file_atomic(s.out + "/analysis.json", j.dump(1) + "\n");
  write_analysis_h5(s.out + "/analysis.h5", a, h5_extra, s.settings);
  core::write_file_atomic(s.out + "/roles.csv", roles_csv(a));
  const auto plots = write_plots(s.out, a);
  core::log_info("analyze", "wrote analysis.json, analysis.h5, roles.csv and " + std::to_string(plots.size()) + " plots to " + s.out);
  std::cout << summary_line(a) << "\n";
  return 0;
}

}  // namespace hp::analysis
