// The `prune` executable: parses argv into a Config (defaults → --config YAML → flags and --set →
// validate), dispatches to a subcommand, and is the one place that catches errors.
// Exit codes: 0 ok, 1 runtime error, 2 configuration or usage error.
#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string_view>
#include <thread>
#include <iostream>
#include <map>

#include "core/blas.h"
#include "core/config.h"
#include "core/distributed.h"
#include "core/errors.h"
#include "analysis/analyze.h"
#include "analysis/explain.h"
#include "analysis/report.h"
#include "analysis/triggers.h"
#include "core/log.h"
#include "prune/cli/commands.h"

namespace {

using hp::core::Config;

// A CLI flag that sets one config key. The flag's help is the key's own help text.
struct Shortcut {
  const char* flag;
  const char* key;
};

// Flags per subcommand. A flag is only a shorter spelling of a config key (also settable with --set).
const std::vector<Shortcut> kCommonFlags = {
    {"--model", "model.path"}, {"--task", "data.task"}, {"--data-root", "data.root"},
    {"--max-seq-len", "data.max_seq_len"}, {"--threads", "run.threads"}, {"--seed", "run.seed"},
    {"--out", "run.out_dir"},
};
const std::vector<Shortcut> kEvalFlags = {
    {"--split", "eval.split"}, {"--mask", "eval.mask"}, {"--batch", "eval.batch_size"},
    {"--output", "eval.output"}, {"--max-examples", "eval.max_examples"},
};
const std::vector<Shortcut> kInferFlags = {
    {"--input", "infer.input"}, {"--output", "infer.output"}, {"--hidden", "infer.hidden"},
    {"--batch", "infer.batch_size"},
};

const std::vector<Shortcut> kTrainFlags = {
    {"--epochs", "train.epochs"}, {"--max-steps", "train.max_steps"}, {"--lr", "train.lr_peak"},
    {"--batch", "train.batch_size"}, {"--resume", "train.resume"},
    {"--max-train-examples", "train.max_train_examples"}, {"--gates", "gates.enabled"},
    {"--lambda", "gates.lambda"}, {"--target-heads", "gates.target_heads"}, {"--distill", "gates.distill"},
};

const std::vector<Shortcut> kExportFlags = {{"--to", "export.out"}, {"--hdf5", "export.hdf5"}, {"--dense", "export.dense"},
                                             {"--onnx", "export.onnx"}};

const std::vector<Shortcut> kBenchFlags = {{"--compare", "bench.compare"}, {"--seq", "bench.seq"},
                                           {"--batches", "bench.batches"}, {"--min-seconds", "bench.min_seconds"}};

// `prune analyze` (its --out is analysis.out, the folder the analysis writes).
const std::vector<Shortcut> kAnalyzeFlags = {
    {"--split", "analysis.split"}, {"--examples", "analysis.examples"}, {"--syntax", "analysis.syntax"},
    {"--compare", "analysis.compare"}, {"--mask", "analysis.mask"}, {"--prune-run", "analysis.prune_run"},
    {"--resamples", "analysis.resamples"}, {"--control", "analysis.control"}, {"--tau", "analysis.tau"},
    {"--alpha", "analysis.alpha"}, {"--batch", "analysis.batch_size"}, {"--out", "analysis.out"},
};

// `prune explain` (its --out is explain.out).
const std::vector<Shortcut> kExplainFlags = {
    {"--split", "explain.split"}, {"--example", "explain.example"}, {"--text", "explain.text"},
    {"--text-b", "explain.text_b"}, {"--threshold", "explain.threshold"}, {"--target", "explain.target"},
    {"--steps", "prune.attattr_steps"}, {"--out", "explain.out"},
};

// `prune triggers` (its --out is triggers.out).
const std::vector<Shortcut> kTriggersFlags = {
    {"--split", "triggers.split"}, {"--examples", "triggers.examples"}, {"--eval-split", "triggers.eval_split"},
    {"--top-k", "triggers.top_k"}, {"--steps", "prune.attattr_steps"}, {"--out", "triggers.out"},
};

// `prune report RUN_DIR... --out report.html` (RUN_DIR... is report.runs).
const std::vector<Shortcut> kReportFlags = {
    {"runs", "report.runs"}, {"--out", "report.out"}, {"--split", "report.split"},
    {"--examples", "report.examples"}, {"--count", "report.count"}, {"--text", "report.text"},
    {"--text-b", "report.text_b"}, {"--texts", "report.texts"}, {"--slim", "report.slim"},
    {"--model", "report.model"},
};

// The pruning run (no subcommand).
const std::vector<Shortcut> kPruneFlags = {
    {"--target-heads", "prune.target_heads"}, {"--criteria", "prune.criteria"}, {"--method", "prune.method"},
    {"--schedule", "prune.schedule"}, {"--iterative", "prune.iterative"}, {"--per-layer", "prune.per_layer"},
    {"--seeds", "prune.seeds"}, {"--rank-examples", "prune.rank_examples"}, {"--gates-run", "prune.gates_run"},
    {"--recover-steps", "prune.recover_steps"},
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

struct Subcommand {
  std::string name, help;
  std::vector<Shortcut> flags;
  std::function<int(const Config&)> run;
  bool data_parallel = false;  // runs as one rank of a torchrun launch (core/distributed.h)
};

// A hash of the weights file of a model folder (ranks must load the same weights), or "" without one.
std::string weights_hash(const std::string& model_dir) {
  for (const char* name : {"model.safetensors", "pytorch_model.bin"}) {
    std::ifstream in(model_dir + "/" + name, std::ios::binary);
    if (!in) continue;
    std::string chunk(1 << 20, '\0');
    size_t h = 0;
    while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
      h = h * 1000003u ^ std::hash<std::string_view>{}(std::string_view(chunk.data(), static_cast<size_t>(in.gcount())));
      if (!in) break;
    }
    return std::string(name) + " " + std::to_string(h);
  }
  return "";
}

// Threads, the process group of a torchrun launch (when there is one) and the runtime line.
int start(const Config& cfg, const std::string& command, bool data_parallel) {
  const auto env = hp::core::dist::read_env([](const char* name) { return std::getenv(name); });
  if (env.world > 1 && !data_parallel)
    throw hp::ConfigError("`prune " + command + "` runs in one process, but WORLD_SIZE = " + std::to_string(env.world) +
                          "; launch it without torchrun (data-parallel: the pruning run, train, eval and analyze)");
  int threads = cfg.run.threads;
  if (threads == 0 && env.local_world > 1)  // the machine's cores are shared by its processes
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / env.local_world);
  hp::core::set_threads(threads);
  hp::core::dist::init(env, cfg.run.dist_timeout_s, hp::core::dump_yaml(cfg) + "weights: " + weights_hash(cfg.model.path));
  std::string how;
  if (env.world > 1)
    how = " | rank " + std::to_string(env.rank) + " of " + std::to_string(env.world) + " (" + env.source + ", Gloo at " +
          env.master_addr + ":" + std::to_string(env.master_port) + ")";
  hp::core::log_info("runtime", hp::core::runtime_summary() + how);
  return 0;
}

struct ParsedFlags {
  std::string config_file;
  std::vector<std::string> sets;
  bool dump_config = false;
  std::vector<std::pair<std::string, std::string>> values;  // (key, text) in flag order
  std::map<std::string, std::string> storage;
  std::map<std::string, bool> bool_storage;
  std::map<std::string, std::vector<std::string>> list_storage;  // positional lists
};

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
  if (!parsed.config_file.empty()) hp::core::load_yaml(cfg, parsed.config_file);
  for (const auto& s : flags) {
    if (app->count(s.flag) == 0) continue;
    if (positional(s)) {
      std::string list;
      for (const auto& v : parsed.list_storage.at(s.key)) {
        if (v.find(',') != std::string::npos)
          throw hp::ConfigError(v + ": a comma in a path given as " + s.key + "; rename the folder or use a symlink without one");
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

int real_main(int argc, char** argv) {
  hp::core::init_logging();
  hp::core::ensure_fast_blas(argc, argv);

  CLI::App app{"headprune: find which attention heads of a BERT encoder matter, prune the rest, prove it with curves.\n"
               "Without a subcommand: the pruning run, e.g. prune --config configs/sst2.yaml --target-heads 36"};
  app.require_subcommand(0, 1);
  std::vector<Shortcut> prune_flags = kCommonFlags;
  prune_flags.insert(prune_flags.end(), kPruneFlags.begin(), kPruneFlags.end());
  ParsedFlags prune_parsed;
  add_flags(&app, prune_flags, prune_parsed);
  bool version = false;
  app.add_flag("--version", version, "print versions of headprune, LibTorch, the BLAS kernel and threads");

  std::vector<Subcommand> subs = {
      {"eval", "evaluate a model on a GLUE task, optionally with heads masked", kEvalFlags, hp::cli::run_eval, true},
      {"infer", "write logits (and hidden states) for each line of a text file", kInferFlags, hp::cli::run_infer},
      {"export", "write a model folder as a Hugging Face checkpoint (+ HDF5 of the same tensors)", kExportFlags,
       hp::cli::run_export},
      {"train", "fine-tune on a GLUE task; with --gates or --target-heads N, learn which heads to keep",
       kTrainFlags, hp::cli::run_train, true},
      {"bench", "latency, throughput, parameters and FLOPs of a model (--compare DIR: speedup vs the FLOP bound)",
       kBenchFlags, hp::cli::run_bench},
      {"analyze", "what every head does over a data set: Clark's statistics, Voita's roles, Pande's tests (analysis/DEFINITIONS.md)",
       kAnalyzeFlags, hp::analysis::run_analyze, true},
      {"explain", "Hao et al.'s attribution tree of one example: how information flows to the prediction, layer by layer",
       kExplainFlags, hp::analysis::run_explain},
      {"triggers", "Hao et al.'s adversarial triggers: attribution patterns of one class inserted into the others, against random pairs",
       kTriggersFlags, hp::analysis::run_triggers},
      {"report", "one offline HTML page of a pruning run, an analysis and gated runs, with attention views, trees and rollout",
       kReportFlags, hp::analysis::run_report},
  };
  std::map<std::string, ParsedFlags> parsed;
  std::map<std::string, CLI::App*> apps;
  for (const auto& s : subs) {
    CLI::App* sub = app.add_subcommand(s.name, s.help);
    add_flags(sub, with_common(s.flags), parsed[s.name]);
    apps[s.name] = sub;
  }
  bool doc = false;
  CLI::App* config_cmd = app.add_subcommand("config", "print the reference of every config key (--doc)");
  config_cmd->add_flag("--doc", doc, "print the Markdown key reference (configs/README.md is generated from it)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // Usage errors end like every other error: one `error:` line and exit 2 (CLI11's own codes are 100+).
    std::vector<std::string> commands = {"config"};
    for (const auto& s : subs) commands.push_back(s.name);
    const std::string first = argc > 1 ? argv[1] : "";
    const bool unknown_command = !first.empty() && first[0] != '-' &&
                                 std::find(commands.begin(), commands.end(), first) == commands.end();
    if (unknown_command) {
      const std::string near = hp::core::nearest_key(first, commands);
      std::cerr << "error: unknown command '" << first << "'"
                << (near.empty() ? "" : "; did you mean '" + near + "'?") << " (prune --help lists the commands)\n";
    } else {
      std::cerr << "error: " << e.what() << "; see `prune " << (first.empty() || first[0] == '-' ? "" : first + " ")
                << "--help`\n";
    }
    return 2;
  }
  if (version) {
    hp::core::set_threads(0);
    std::cout << "headprune " << hp::core::headprune_version() << "\n" << hp::core::runtime_summary() << "\n";
    return 0;
  }
  if (config_cmd->parsed()) {
    std::cout << hp::core::config_doc();
    return 0;
  }
  for (const auto& s : subs) {
    if (!apps[s.name]->parsed()) continue;
    Config cfg = resolve(apps[s.name], with_common(s.flags), parsed[s.name]);
    if (parsed[s.name].dump_config) {
      std::cout << hp::core::dump_yaml(cfg);
      return 0;
    }
    start(cfg, s.name, s.data_parallel);
    const int rc = s.run(cfg);
    hp::core::dist::shutdown();
    return rc;
  }
  // No subcommand: the pruning run.
  if (argc < 2) {
    std::cout << app.help();
    return 2;
  }
  Config cfg = resolve(&app, prune_flags, prune_parsed);
  if (prune_parsed.dump_config) {
    std::cout << hp::core::dump_yaml(cfg);
    return 0;
  }
  start(cfg, "", true);
  const int rc = hp::cli::run_prune(cfg);
  hp::core::dist::shutdown();
  return rc;
}

}  // namespace

// The one error line; in a data-parallel run it names this rank and tells the other ranks why it stopped.
int fail(const std::string& message, int code) {
  std::cerr << "error: " << hp::core::dist::error_prefix() << message << "\n";
  hp::core::dist::report_failure(message);
  return code;
}

int main(int argc, char** argv) {
  try {
    return real_main(argc, argv);
  } catch (const hp::ConfigError& e) {
    return fail(e.what(), 2);
  } catch (const hp::Error& e) {
    return fail(e.what(), 1);
  } catch (const c10::Error& e) {
    return fail(std::string("LibTorch: ") + e.what_without_backtrace(), 1);
  } catch (const std::exception& e) {
    return fail(e.what(), 1);
  }
}
