// The `prune` executable: parses argv into a Config (cli/flags.h), dispatches to a subcommand, and is the
// one place that catches errors.
// Exit codes: 0 ok, 1 runtime error, 2 configuration or usage error.
#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include <algorithm>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string_view>
#include <thread>
#include <iostream>
#include <map>

#include "core/kernels/blas.h"
#include "core/kernels/attention_kernel.h"  // set_bf16_attention_enabled
#include "core/kernels/device.h"
#include "core/kernels/dispatch_probe.h"
#include "core/kernels/runtime.h"
#include "core/base/version.h"
#include "core/base/config.h"
#include "core/io/safetensors_index.h"
#include "core/dist/distributed.h"
#include "core/base/errors.h"
#include "core/base/log.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/guides.h"

namespace {

using hp::core::Config;
using namespace hp::cli;  // the flag tables

struct Subcommand {
  std::string name, help;
  std::vector<Shortcut> flags;
  std::function<int(const Config&)> run;
  bool data_parallel = false;  // runs as one rank of a torchrun launch (core/dist/distributed.h)
};

// A hash of the weights files of a model folder (ranks must load the same weights: model.safetensors, the index and
// shards of a sharded checkpoint, or pytorch_model.bin), or "" without one.
std::string weights_hash(const std::string& model_dir) {
  const auto files = hp::core::weights_files(model_dir);
  if (files.empty()) return "";
  size_t h = 0;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::string chunk(1 << 20, '\0');
    while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
      h = h * 1000003u ^
          std::hash<std::string_view>{}(std::string_view(chunk.data(), static_cast<size_t>(in.gcount())));
      if (!in) break;
    }
  }
  return std::filesystem::path(files.front()).filename().string() + " " + std::to_string(h);
}

// Whether every rank measured bf16 faster (ranks must compute alike); this process's answer alone without ranks.
bool on_every_rank(bool bf16, const std::string& what) {
  if (!hp::core::dist::active()) return bf16;
  auto votes = torch::tensor({bf16 ? 1.0 : 0.0});
  hp::core::dist::all_reduce_sum(votes, what);
  return votes.item<double>() == hp::core::dist::world();
}

// The measured dispatch (core/kernels/dispatch_probe.h) applied and logged, the same on every rank; train.precision
// auto resolved by it (fp32 on a GPU, which the probe does not measure); a bf16 precision asked for where the probe
// measured it slower runs with a warning.
void apply_dispatch(Config& cfg) {
  const auto& d = hp::core::apply_measured_dispatch();
  if (d.attention.measured())
    hp::core::set_bf16_attention_enabled(on_every_rank(d.attention_bf16(), "the measured dispatch"));
  hp::core::log_info("runtime", hp::core::dispatch_summary(d));
  if (cfg.train.precision == "auto") {
    std::string why;
    const std::string p = hp::core::auto_training_precision(d, &why);
    const bool bf16 = on_every_rank(p == "bf16", "train.precision auto") && cfg.run.device == "cpu";
    cfg.train.precision = bf16 ? "bf16" : "fp32";
    if (cfg.run.device != "cpu") why = "fp32 on " + cfg.run.device + " (the dispatch probe measures the CPU)";
    else if (p == "bf16" && !bf16) why = "fp32: another rank measured bf16 slower";
    hp::core::log_info("runtime", "train.precision auto: " + why);
  }
  for (const auto& [key, value] : {std::pair{"run.precision", cfg.run.precision}, {"train.precision", cfg.train.precision}})
    if (value == "bf16")
      if (const std::string w = hp::core::slower_bf16_warning(d, key); !w.empty()) hp::core::log_warn("runtime", w);
}

// Threads, the process group of a torchrun launch (when there is one) and the runtime line.
int start(Config& cfg, const std::string& command, bool data_parallel) {
  const auto env = hp::core::dist::read_env([](const char* name) { return std::getenv(name); });
  if (env.world > 1 && !data_parallel)
    throw hp::ConfigError("`prune " + command + "` runs in one process, but WORLD_SIZE = " + std::to_string(env.world) +
                          "; launch it without torchrun (data-parallel: the pruning run, train, eval and analyze)");
  int threads = cfg.run.threads;
  if (threads == 0 && env.local_world > 1)  // the machine's cores are shared by its processes
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / env.local_world);
  hp::core::set_threads(threads);
  hp::core::dist::init(env, cfg.run.dist_timeout_s,
                       hp::core::dump_yaml(cfg) + "weights: " + weights_hash(cfg.model.path));
  std::string how;
  if (env.world > 1)
    how = " | rank " + std::to_string(env.rank) + " of " + std::to_string(env.world) + " (" + env.source +
          ", Gloo at " + env.master_addr + ":" + std::to_string(env.master_port) + ")";
  apply_dispatch(cfg);
  hp::core::log_info("runtime", hp::core::runtime_summary() + how);
  if (cfg.run.device != "cpu") {  // checked before any work: a missing GPU is the first line, not the last
    const auto device = hp::core::parse_device(cfg.run.device);
    hp::core::log_info("runtime",
                       "run.device " + device.str() + ": training and its evaluations, the criteria, the search's " +
                           "gradients and tuning, the curves' fp32 evaluations, `prune eval` and analyze there " +
                           "(the frontier's measurements, timing and bf16/int8 inference stay on the CPU) | " +
                           hp::core::gpu_summary());
  }
  return 0;
}

// The subcommands: name, help, flags, entry point (cli/commands.h), data-parallel or not.
std::vector<Subcommand> subcommands() {
  using namespace hp::cli;
  return {
      {"eval", "evaluate a model on a GLUE task, optionally with heads masked (a sentence-transformers model: STS-B by the cosine of its embeddings)", kEvalFlags, run_eval, true},
      {"infer", "write logits (and hidden states) for each line of a text file", kInferFlags, run_infer},
      {"embed", "sentence embeddings of each line of a text file with a sentence-transformers model, as encode() "
                "computes them", kEmbedFlags, run_embed},
      {"export", "write a model folder as a Hugging Face checkpoint (+ HDF5 of the same tensors)", kExportFlags,
       run_export},
      {"train", "fine-tune on a GLUE task; with --gates, --target-heads N or --target-flops F, learn which heads (and FFN neurons) to keep", kTrainFlags,
       run_train, true},
      {"bench", "latency, throughput, parameters and FLOPs of a model (--compare DIR: speedup vs the FLOP bound)",
       kBenchFlags, run_bench},
      {"analyze",
       "what every head does over a data set: Clark's statistics, Voita's roles, Pande's tests (analysis/DEFINITIONS.md)",
       kAnalyzeFlags, run_analyze, true},
      {"explain",
       "Hao et al.'s attribution tree of one example: how information flows to the prediction, layer by layer",
       kExplainFlags, run_explain},
      {"triggers",
       "Hao et al.'s adversarial triggers: attribution patterns of one class inserted into the others, against random pairs",
       kTriggersFlags, run_triggers},
      {"report",
       "one offline HTML page of a pruning run, an analysis and gated runs, with attention views, trees and rollout",
       kReportFlags, run_report},
  };
}

// A CLI11 usage error as the one `error:` line (exit 2; CLI11's own codes are 100+).
int usage_error(const CLI::ParseError& e, int argc, char** argv, const std::vector<Subcommand>& subs) {
  std::vector<std::string> commands = {"config"};
  for (const auto& s : subs) commands.push_back(s.name);
  const std::string first = argc > 1 ? argv[1] : "";
  const bool unknown_command =
      !first.empty() && first[0] != '-' && std::find(commands.begin(), commands.end(), first) == commands.end();
  if (unknown_command) {
    const std::string near = hp::core::nearest_key(first, commands);
    std::cerr << "error: unknown command '" << first << "'" << (near.empty() ? "" : "; did you mean '" + near + "'?")
              << " (prune --help lists the commands)\n";
  } else {
    std::cerr << "error: " << e.what() << "; see `prune " << (first.empty() || first[0] == '-' ? "" : first + " ")
              << "--help`\n";
  }
  return 2;
}

// Resolves the config of a parsed (sub)command and runs it (or prints the config with --dump-config).
int run_command(CLI::App* app, const std::vector<Shortcut>& flags, const ParsedFlags& parsed, const std::string& name,
                const std::function<int(const Config&)>& run, bool data_parallel) {
  Config cfg = resolve(app, flags, parsed);
  if (parsed.dump_config) {
    std::cout << hp::core::dump_yaml(cfg);
    return 0;
  }
  start(cfg, name, data_parallel);
  const int rc = run(cfg);
  hp::core::dist::shutdown();
  return rc;
}

// `prune config`: the key reference (--doc, the default) or the shipped configs (--list).
int run_config(bool list) {
  if (list) {
    for (const auto& c : shipped_configs()) std::cout << c.name << "\t" << c.path << "\t" << c.about << "\n";
    return 0;
  }
  std::cout << hp::core::config_doc();
  return 0;
}

int real_main(int argc, char** argv) {
  hp::core::init_logging();
  hp::core::ensure_fast_blas(argc, argv);
  hp::core::apply_isa_cap_to_onednn();  // HEADPRUNE_MAX_ISA, before oneDNN's first kernel

  CLI::App app{
      "headprune: find which attention heads of a BERT encoder matter, prune the rest, prove it with curves.\n"
      "Without a subcommand: the pruning run, e.g. prune --config sst2.yaml --target-heads 36"};
  app.require_subcommand(0, 1);
  std::vector<Shortcut> prune_flags = kCommonFlags;
  prune_flags.insert(prune_flags.end(), kPruneFlags.begin(), kPruneFlags.end());
  ParsedFlags prune_parsed;
  add_flags(&app, prune_flags, prune_parsed);
  bool version = false;
  app.add_flag("--version", version, "print versions of headprune, LibTorch, the BLAS kernel and threads");

  const std::vector<Subcommand> subs = subcommands();
  std::map<std::string, ParsedFlags> parsed;
  std::map<std::string, CLI::App*> apps;
  for (const auto& s : subs) apps[s.name] = app.add_subcommand(s.name, s.help);
  for (const auto& s : subs) add_flags(apps[s.name], with_common(s.flags), parsed[s.name]);
  bool doc = false, list = false;
  CLI::App* config_cmd =
      app.add_subcommand("config", "print the reference of every config key (--doc), or the shipped configs (--list)");
  config_cmd->add_flag("--doc", doc, "print the Markdown key reference (configs/README.md is generated from it)");
  config_cmd->add_flag("--list", list, "list the shipped configs that --config NAME finds, with their paths");
  app.footer(guide_footer(""));  // each --help ends with its guide (cli/guides.h)
  for (const auto& s : subs) apps[s.name]->footer(guide_footer(s.name));
  config_cmd->footer(guide_footer("config"));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code() == 0 ? app.exit(e) : usage_error(e, argc, argv, subs);  // exit code 0: --help
  }
  if (version) {
    hp::core::set_threads(0);
    const auto& dispatch = hp::core::apply_measured_dispatch();
    std::cout << "headprune " << hp::core::headprune_version() << "\n"
              << hp::core::runtime_summary() << "\n"
              << hp::core::dispatch_summary(dispatch) << "\n"
              << hp::core::gpu_summary() << "\n";
    return 0;
  }
  if (config_cmd->parsed()) return run_config(list);
  for (const auto& s : subs)
    if (apps[s.name]->parsed())
      return run_command(apps[s.name], with_common(s.flags), parsed[s.name], s.name, s.run, s.data_parallel);
  if (argc < 2) {  // no subcommand and nothing else: the help
    std::cout << app.help();
    return 2;
  }
  return run_command(&app, prune_flags, prune_parsed, "", hp::cli::run_prune, true);  // the pruning run
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
