// The one rule for every command that writes a run folder (the pruning run, `prune train`): a new run
// goes into an absent or empty folder, or into one holding a run of the same kind and the same config
// (which it then resumes or redoes); anything else is refused before a file is touched. Torch-free.
#pragma once

#include <string>

namespace hp::core {

// The kinds of run folder and the file in which each records its config (relative to the folder).
enum class RunKind { kPruning, kTraining };
const char* run_kind_name(RunKind kind);    // "pruning run", "training run"
const char* run_kind_record(RunKind kind);  // "state/config.yaml", "config.resolved.yaml"

// `dir` is about to hold a run of `kind` with config `config_yaml`. Returns true when dir already holds
// this run (same kind, same recorded config); false when dir is absent or empty. Throws ConfigError naming
// dir, what it holds (a run of another kind, or another config and its first differing line, or files of no
// run) and the fix (--out NEW_DIR).
bool claim_run_folder(const std::string& dir, RunKind kind, const std::string& config_yaml);

}  // namespace hp::core
