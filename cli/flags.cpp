// The flag tables and config resolution of the `prune` command line (see cli/flags.h).
#include "cli/flags.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/base/errors.h"
#include "core/base/log.h"
#include "core/base/version.h"

namespace hp::cli {

namespace fs = std::filesystem;
using core::Config;

// Flags per subcommand. A flag is only a shorter spelling of a config key (also settable with --set).
const std::vector<Shortcut> kCommonFlags = {
    {"--model", "model.path"},    {"--task", "data.task"},
    {"--data-root", "data.root"}, {"--max-seq-len", "data.max_seq_len"},
    {"--threads", "run.threads"}, {"--seed", "run.seed"},
    {"--out", "run.out_dir"},     {"--device", "run.device"},
    {"--train-file", "data.train_file"}, {"--validation-file", "data.validation_file"},
};
const std::vector<Shortcut> kEvalFlags = {
    {"--split", "eval.split"},
    {"--mask", "eval.mask"},
    {"--batch", "eval.batch_size"},
    {"--output", "eval.output"},
    {"--max-examples", "eval.max_examples"},
    {"--precision", "run.precision"},
    {"--calibrate", "run.calibrate"},
};
const std::vector<Shortcut> kInferFlags = {
    {"--input", "infer.input"},
    {"--output", "infer.output"},
    {"--hidden", "infer.hidden"},
    {"--batch", "infer.batch_size"},
    {"--precision", "run.precision"},
    {"--calibrate", "run.calibrate"},
};

const std::vector<Shortcut> kEmbedFlags = {
    {"--input", "embed.input"},         {"--output", "embed.output"},     {"--batch", "embed.batch_size"},
    {"--max-tokens", "embed.max_seq_len"}, {"--precision", "run.precision"}, {"--calibrate", "run.calibrate"},
};

const std::vector<Shortcut> kTrainFlags = {
    {"--epochs", "train.epochs"},
    {"--max-steps", "train.max_steps"},
    {"--lr", "train.lr_peak"},
    {"--batch", "train.batch_size"},
    {"--resume", "train.resume"},
    {"--max-train-examples", "train.max_train_examples"},
    {"--gates", "gates.enabled"},
    {"--lambda", "gates.lambda"},
    {"--target-heads", "gates.target_heads"},
    {"--target-flops", "gates.target_flops"},
    {"--target-params", "gates.target_params"},
    {"--distill", "gates.distill"},
    {"--precision", "train.precision"},
};

const std::vector<Shortcut> kExportFlags = {
    {"--to", "export.out"}, {"--hdf5", "export.hdf5"}, {"--dense", "export.dense"}, {"--onnx", "export.onnx"},
    {"--int8", "export.int8"}, {"--mask", "export.mask"}, {"--force", "export.force"}};

const std::vector<Shortcut> kBenchFlags = {{"--compare", "bench.compare"},
                                           {"--seq", "bench.seq"},
                                           {"--batches", "bench.batches"},
                                           {"--min-seconds", "bench.min_seconds"},
                                           {"--precision", "run.precision"},
                                           {"--calibrate", "run.calibrate"}};

// `prune analyze` (its --out is analysis.out, the folder the analysis writes).
const std::vector<Shortcut> kAnalyzeFlags = {
    {"--split", "analysis.split"},         {"--examples", "analysis.examples"}, {"--syntax", "analysis.syntax"},
    {"--compare", "analysis.compare"},     {"--mask", "analysis.mask"},         {"--prune-run", "analysis.prune_run"},
    {"--resamples", "analysis.resamples"}, {"--control", "analysis.control"},   {"--tau", "analysis.tau"},
    {"--alpha", "analysis.alpha"},         {"--batch", "analysis.batch_size"},  {"--out", "analysis.out"},
};

// `prune explain` (its --out is explain.out).
const std::vector<Shortcut> kExplainFlags = {
    {"--split", "explain.split"},         {"--example", "explain.example"},
    {"--text", "explain.text"},           {"--text-b", "explain.text_b"},
    {"--threshold", "explain.threshold"}, {"--target", "explain.target"},
    {"--steps", "prune.attattr_steps"},   {"--out", "explain.out"},
};

// `prune triggers` (its --out is triggers.out).
const std::vector<Shortcut> kTriggersFlags = {
    {"--split", "triggers.split"}, {"--examples", "triggers.examples"}, {"--eval-split", "triggers.eval_split"},
    {"--top-k", "triggers.top_k"}, {"--steps", "prune.attattr_steps"},  {"--out", "triggers.out"},
};

// `prune report RUN_DIR... --out report.html` (RUN_DIR... is report.runs).
const std::vector<Shortcut> kReportFlags = {
    {"runs", "report.runs"},           {"--out", "report.out"},     {"--split", "report.split"},
    {"--examples", "report.examples"}, {"--count", "report.count"}, {"--text", "report.text"},
    {"--text-b", "report.text_b"},     {"--texts", "report.texts"}, {"--slim", "report.slim"},
    {"--model", "report.model"},
};

// The pruning run (no subcommand).
const std::vector<Shortcut> kPruneFlags = {
    {"--target-heads", "prune.target_heads"},     {"--target-flops", "prune.target_flops"},
    {"--target-params", "prune.target_params"},   {"--target-latency", "prune.target_latency"},
    {"--max-drop", "prune.max_drop"},
    {"--target-layers", "prune.target_layers"}, {"--layer-choice", "prune.layer_choice"},
    {"--structures", "prune.structures"},
    {"--criteria", "prune.criteria"},           {"--method", "prune.method"},
    {"--schedule", "prune.schedule"},           {"--iterative", "prune.iterative"},
    {"--per-layer", "prune.per_layer"},         {"--seeds", "prune.seeds"},
    {"--rank-examples", "prune.rank_examples"}, {"--gates-run", "prune.gates_run"},
    {"--recover-steps", "prune.recover_steps"},
    {"--precision", "run.precision"},
};

// The common flags plus a subcommand's own; a subcommand flag of the same name replaces the common one.
std::vector<Shortcut> with_common(const std::vector<Shortcut>& own) {
  std::vector<Shortcut> flags;
  for (const auto& c : kCommonFlags)
    if (std::none_of(own.begin(), own.end(), [&](const Shortcut& o) { return std::string(o.flag) == c.flag; }))
      flags.push_back(c);
  flags.insert(flags.end(), own.begin(), own.end());
  return flags;
}

namespace {

// A flag without a leading '-' is positional and takes any number of values (a list key).
bool positional(const Shortcut& s) { return s.flag[0] != '-'; }

// The config field a flag sets (every Shortcut names an existing key: a test runs every --help).
const hp::core::FieldRef& field(const std::string& key) {
  static Config defaults;
  static const std::vector<hp::core::FieldRef> fields = hp::core::config_fields(defaults);
  for (const auto& f : fields)
    if (f.path == key) return f;
  throw hp::InternalError("a CLI flag sets the unknown config key " + key);
}

std::string help_of(const std::string& key) { return field(key).help + " [" + key + "]"; }

bool is_bool_key(const std::string& key) { return std::holds_alternative<bool*>(field(key).ptr); }

// The value a key takes, as --help shows it: INT, FLOAT, TEXT or a list of them.
std::string type_of(const std::string& key) {
  const auto& p = field(key).ptr;
  if (std::holds_alternative<int*>(p)) return "INT";
  if (std::holds_alternative<double*>(p)) return "FLOAT";
  if (std::holds_alternative<std::vector<int>*>(p)) return "INT,...";
  if (std::holds_alternative<std::vector<std::string>*>(p)) return "TEXT,...";
  return "TEXT";
}

}  // namespace

void add_flags(CLI::App* app, const std::vector<Shortcut>& flags, ParsedFlags& parsed) {
  for (const auto& s : flags) {
    if (positional(s)) app->add_option(s.flag, parsed.list_storage[s.key], help_of(s.key));
    else if (is_bool_key(s.key)) app->add_flag(s.flag, parsed.bool_storage[s.key], help_of(s.key));
    else app->add_option(s.flag, parsed.storage[s.key], help_of(s.key))->type_name(type_of(s.key));
  }
  app->add_option("--config", parsed.config_file, "YAML config file (see configs/README.md)");
  app->add_option("--set", parsed.sets, "override any config key: --set eval.batch_size=32 (repeatable)");
  app->add_flag("--dump-config", parsed.dump_config, "print the resolved configuration as YAML and exit");
}

Config resolve(CLI::App* app, const std::vector<Shortcut>& flags, const ParsedFlags& parsed) {
  Config cfg;
  if (!parsed.config_file.empty()) hp::core::load_yaml(cfg, find_config(parsed.config_file));
  for (const auto& s : flags) {
    if (app->count(s.flag) == 0) continue;
    if (positional(s)) {
      std::string list;
      for (const auto& v : parsed.list_storage.at(s.key)) {
        if (v.find(',') != std::string::npos)
          throw hp::ConfigError(v + ": a comma in a path given as " + s.key +
                                "; rename the folder or use a symlink without one");
        list += (list.empty() ? "" : ",") + v;
      }
      hp::core::set_value(cfg, s.key, list, s.key);
    } else if (is_bool_key(s.key)) {
      hp::core::set_value(cfg, s.key, parsed.bool_storage.at(s.key) ? "true" : "false", s.flag);
    } else {
      hp::core::set_value(cfg, s.key, parsed.storage.at(s.key), s.flag);
    }
  }
  for (const auto& a : parsed.sets) hp::core::apply_set(cfg, a);
  hp::core::validate(cfg);
  return cfg;
}

std::vector<std::string> config_dirs() {
  std::vector<std::string> dirs;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back((exe.parent_path().parent_path() / "share" / "headprune" / "configs").string());
  dirs.push_back(core::source_dir() + "/configs");
  return dirs;
}

std::string find_config(const std::string& name) {
  std::error_code ec;
  if (name.empty() || fs::is_regular_file(name, ec) || name.find('/') != std::string::npos) return name;
  for (const auto& dir : config_dirs())
    for (const std::string& file : {name, name + ".yaml"})
      if (fs::is_regular_file(dir + "/" + file, ec)) {
        const std::string path = fs::weakly_canonical(dir + "/" + file).string();
        core::log_info("config", name + " is not a file here; using the shipped " + path);
        return path;
      }
  std::string names;
  for (const auto& c : shipped_configs()) names += (names.empty() ? "" : ", ") + c.name;
  throw ConfigError(name + ": cannot open config file: no such file here, and no shipped config of that name (" +
                    (names.empty() ? "none found" : names) + "); `prune config --list` lists them");
}

std::vector<ShippedConfig> shipped_configs() {
  std::map<std::string, ShippedConfig> found;  // the first folder that has a name wins
  for (const auto& dir : config_dirs()) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() != ".yaml") continue;
      const std::string name = e.path().stem().string();
      if (found.count(name)) continue;
      ShippedConfig c{name, fs::weakly_canonical(e.path()).string(), ""};
      std::ifstream in(e.path());
      for (std::string line; std::getline(in, line);)
        if (line.rfind("# ", 0) == 0 && line.rfind("# prune ", 0) != 0) {  // the first line past the commands
          c.about = line.substr(2);
          break;
        }
      found[name] = c;
    }
  }
  std::vector<ShippedConfig> out;
  for (auto& [name, c] : found) out.push_back(c);
  return out;
}

}  // namespace hp::cli
