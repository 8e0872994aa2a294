// Run folder ownership (see core/run_folder.h).
#include "core/run_folder.h"

#include <filesystem>
#include <sstream>

#include "core/errors.h"  // ConfigError
#include "core/files.h"   // read_file

namespace hp::core {
namespace fs = std::filesystem;

namespace {

struct KindRow {
  RunKind kind;
  const char* name;
  const char* record;
};
constexpr KindRow kKinds[] = {
    {RunKind::kPruning, "pruning run", "state/config.yaml"},
    {RunKind::kTraining, "training run", "config.resolved.yaml"},
};

const KindRow& row(RunKind kind) {
  for (const auto& r : kKinds)
    if (r.kind == kind) return r;
  return kKinds[0];
}

// What `dir` holds. A pruning run also writes config.resolved.yaml, and a training run's resumable state
// also has a state/config.yaml, next to its state/state.json.
const KindRow* detect(const std::string& dir) {
  if (fs::exists(dir + "/state/config.yaml") && !fs::exists(dir + "/state/state.json")) return &row(RunKind::kPruning);
  if (fs::exists(dir + "/config.resolved.yaml")) return &row(RunKind::kTraining);
  return nullptr;
}

// The first line where two texts differ, quoted from `b` (or `a` where b has ended); "" when equal.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  while (true) {
    const bool ga = static_cast<bool>(std::getline(sa, la)), gb = static_cast<bool>(std::getline(sb, lb));
    if (!ga && !gb) return "";
    if (la != lb || ga != gb) return "'" + (gb ? lb : la) + "'";
  }
}

}  // namespace

const char* run_kind_name(RunKind kind) { return row(kind).name; }
const char* run_kind_record(RunKind kind) { return row(kind).record; }

bool claim_run_folder(const std::string& dir, RunKind kind, const std::string& config_yaml) {
  std::error_code ec;
  if (!fs::exists(dir) || fs::is_empty(dir, ec)) return false;
  if (!fs::is_directory(dir)) throw ConfigError(dir + " is a file, not a run folder; pass --out NEW_DIR");
  const std::string name = run_kind_name(kind);
  if (const KindRow* held = detect(dir)) {
    if (held->kind != kind)
      throw ConfigError(dir + " holds a " + held->name + ", not a " + name + "; pass --out NEW_DIR");
    const std::string old = read_file(dir + "/" + held->record);
    if (old != config_yaml)
      throw ConfigError(dir + " holds another " + name + " (its config differs at " + first_difference(old, config_yaml) +
                        "); pass --out NEW_DIR, or delete " + dir + " to start over");
    return true;
  }
  throw ConfigError(dir + " is not empty and holds no " + name + " (no " + row(kind).record + "); pass --out NEW_DIR");
}

}  // namespace hp::core
