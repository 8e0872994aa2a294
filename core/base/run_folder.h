// The one rule for every command that writes a run folder (the pruning run, `prune train`): a new run
// goes into an absent or empty folder, or into one holding a run of the same kind and the same config
// (which it then resumes or redoes); anything else is refused before a file is touched. Torch-free.
#pragma once

#include <string>
#include <vector>

namespace hp::core {

// The kinds of run folder and the file in which each records its config (relative to the folder).
enum class RunKind { kPruning, kTraining };
const char* run_kind_name(RunKind kind);  // "pruning run", "training run"
const char* run_kind_record(RunKind kind);  // "state/config.yaml", "config.resolved.yaml"

// `dir` is about to hold a run of `kind` with config `config_yaml`. Returns true when dir already holds
// this run (same kind, same recorded config); false when dir is absent, empty, or holds only the lock file,
// the kind's seed file (a pruning run's latency_table.json, put there to be reused) and empty folders. Throws ConfigError naming
// dir, what it holds (a run of another kind, or another config and its first differing line, or files of no
// run) and the fix (--out NEW_DIR).
bool claim_run_folder(const std::string& dir, RunKind kind, const std::string& config_yaml);

// The same rule for a single result file (`prune eval --output`): it may be written when absent, or when it
// holds a result of this command with this config (then it is redone, and true is returned). A result of
// another config, or a file that is no such result, is refused (ConfigError naming the file, the first
// differing config line and the fix: another --output, or delete it). `config_key` is the JSON key under
// which the result records its config as YAML text.
bool claim_result_file(const std::string& path, const std::string& config_key, const std::string& config_yaml);

// The lock file of a run folder; claim_run_folder does not count it as content.
inline constexpr const char* kRunLockFile = "run.lock";

// An exclusive lock on a run folder for the life of the object, taken before the folder is claimed so
// that two runs started at once cannot both find it empty. DIR/run.lock holds an flock and the owner's
// pid, host and start time, and is removed when the run ends (also on an error). A second run gets a
// ConfigError naming the owner and the fix; the file a killed run leaves holds no flock (the kernel drops
// it with the process), so it is taken over, with a warning naming the run that left it, and the staging
// folders of the model folders that run was writing are removed. Creates DIR, and
// removes it again (with any parents it created) when it is still empty as the lock goes: a run refused
// before it wrote anything leaves no folder behind.
class RunLock {
 public:
  explicit RunLock(const std::string& dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  void acquire(const std::string& dir);
  void lock(const std::string& dir);
  void remove_created();
  std::string path_;
  int fd_ = -1;
  std::vector<std::string> created_;  // folders this lock created, deepest first
};

}  // namespace hp::core
