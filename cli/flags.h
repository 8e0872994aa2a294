// The `prune` command line: the flag tables (each flag is a shorter spelling of one config key, also
// settable with --set), and resolving argv into a Config: defaults → --config YAML → flags and --set →
// validate. `--config NAME` that is not a file is looked up among the shipped configs.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/base/config.h"

namespace hp::cli {

// A CLI flag that sets one config key. The flag's help is the key's own help text. A flag without a
// leading '-' is positional and takes any number of values (a list key).
struct Shortcut {
  const char* flag;
  const char* key;
};

// Flags per subcommand (cli/flags.cpp).
extern const std::vector<Shortcut> kCommonFlags, kEvalFlags, kInferFlags, kEmbedFlags, kTrainFlags, kExportFlags, kBenchFlags,
    kAnalyzeFlags, kExplainFlags, kTriggersFlags, kReportFlags, kPruneFlags;

// The common flags plus a subcommand's own; a subcommand flag of the same name replaces the common one.
std::vector<Shortcut> with_common(const std::vector<Shortcut>& own);

struct ParsedFlags {
  std::string config_file;
  std::vector<std::string> sets;
  bool dump_config = false;
  std::map<std::string, std::string> storage;
  std::map<std::string, bool> bool_storage;
  std::map<std::string, std::vector<std::string>> list_storage;  // positional lists
};

// Registers `flags` and --config, --set, --dump-config on `app`, storing into `parsed`.
void add_flags(CLI::App* app, const std::vector<Shortcut>& flags, ParsedFlags& parsed);

// The validated Config of one parsed (sub)command.
core::Config resolve(CLI::App* app, const std::vector<Shortcut>& flags, const ParsedFlags& parsed);

// The folders searched for shipped configs, in order: <prefix>/share/headprune/configs beside an installed
// binary, then the source tree's configs/.
std::vector<std::string> config_dirs();

// The file `--config` names: `name` itself when it is a file; else, for a bare name (no '/'), NAME or
// NAME.yaml in the first of config_dirs() that has it (logged). Otherwise `name` (load_yaml then says it
// cannot open it).
std::string find_config(const std::string& name);

// Every shipped config as (name, path, first comment line), by name.
struct ShippedConfig {
  std::string name, path, about;
};
std::vector<ShippedConfig> shipped_configs();

}  // namespace hp::cli
