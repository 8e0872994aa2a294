// Run folder ownership (see core/base/run_folder.h).
#include "core/base/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/base/config.h"  // config_diff
#include "core/base/errors.h"  // ConfigError, InputError
#include "core/base/files.h"  // read_file
#include "core/base/log.h"

namespace hp::core {
namespace fs = std::filesystem;

namespace {

struct KindRow {
  RunKind kind;
  const char* name;
  const char* record;
  const char* seed;  // a file the user may put into a new folder for the run to reuse ("" = none)
};
constexpr KindRow kKinds[] = {
    {RunKind::kPruning, "pruning run", "state/config.yaml", "latency_table.json"},
    {RunKind::kTraining, "training run", "config.resolved.yaml", ""},
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

namespace {
bool claim_here(const std::string& dir, RunKind kind, const std::string& config_yaml);
}

bool claim_run_folder(const std::string& dir, RunKind kind, const std::string& config_yaml) {
  return shared_decide([&] { return claim_here(dir, kind, config_yaml) ? 1L : 0L; }) != 0;
}

namespace {
bool claim_here(const std::string& dir, RunKind kind, const std::string& config_yaml) {
  std::error_code ec;
  if (!fs::exists(dir) || fs::is_empty(dir, ec)) return false;
  // Nothing but the lock, the kind's seed file and empty folders (what a run killed before its first record was in
  // place leaves once its NAME.tmp is cleared, e.g. state/): a new run.
  bool fresh = true;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    fresh = fresh && (file == kRunLockFile || file == row(kind).seed ||
                      (entry.is_directory(ec) && !entry.is_symlink(ec) && fs::is_empty(entry.path(), ec)));
  }
  if (fresh) return false;
  if (!fs::is_directory(dir)) throw ConfigError(dir + " is a file, not a run folder; pass --out NEW_DIR");
  const std::string name = run_kind_name(kind);
  if (const KindRow* held = detect(dir)) {
    if (held->kind != kind)
      throw ConfigError(dir + " holds a " + held->name + ", not a " + name + "; pass --out NEW_DIR");
    const std::string old = read_file(dir + "/" + held->record);
    if (old == config_yaml) return true;
    const auto diff = config_diff(old, config_yaml);
    if (!diff.changed.empty())
      throw ConfigError(dir + " holds another " + name + " (its config differs: " + join_list(diff.changed) +
                        "); pass --out NEW_DIR, or delete " + dir + " to start over");
    if (!diff.added_at_default.empty())
      log_warn("run", dir + " was started by a build without " + join_list(diff.added_at_default) +
                          "; resuming with the default, as it ran");
    return true;
  }
  throw ConfigError(dir + " is not empty and holds no " + name + " (no " + row(kind).record + "); pass --out NEW_DIR");
}
}  // namespace

bool claim_result_file(const std::string& path, const std::string& config_key, const std::string& config_yaml) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;  // absent; a folder or a device is refused by the writer
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception&) {
  }
  if (!j.is_object() || !j.contains(config_key) || !j[config_key].is_string())
    throw ConfigError(path + " exists and holds no result of this command (no '" + config_key +
                      "'); pass --output NEW_FILE, or delete it");
  const std::string old = j[config_key].get<std::string>();
  if (old != config_yaml)
    throw ConfigError(path + " holds a result of another config (it differs at " + first_difference(old, config_yaml) +
                      "); pass --output NEW_FILE, or delete " + path + " to replace it");
  return true;
}

namespace {

// "pid 123 on host, since 2026-11-23 03:55:10 UTC": who holds a lock, as written into the file.
std::string owner_line() {
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  return "pid " + std::to_string(getpid()) + " on " + host + ", since " + when;
}

std::string first_line(std::string text) {
  const auto nl = text.find('\n');
  if (nl != std::string::npos) text.resize(nl);
  return text.empty() ? "an unknown run" : text;
}

}  // namespace

RunLock::RunLock(const std::string& dir) : path_(dir + "/" + kRunLockFile) {
  shared_write([&] { acquire(dir); });  // a data-parallel run: rank 0 holds the lock for all ranks
}

void RunLock::acquire(const std::string& dir) {
  std::error_code ec;
  // The folders this run creates (dir and any missing parents), removed again if they are still empty when
  // the lock goes: a refused run leaves the disk as it found it.
  for (fs::path p = fs::absolute(dir, ec).lexically_normal(); !p.empty() && !fs::exists(p, ec) && p != p.parent_path();
       p = p.parent_path())
    created_.push_back(p.string());
  fs::create_directories(dir, ec);
  try {
    lock(dir);
  } catch (...) {
    remove_created();
    throw;
  }
}

void RunLock::remove_created() {
  std::error_code ec;
  for (const auto& d : created_)  // deepest first; stops at the first folder the run filled
    if (!fs::remove(d, ec)) break;
}

void RunLock::lock(const std::string& dir) {
  // A finishing run unlinks the file; if that happened between our open and our flock, the lock is on a
  // file no other run can see: check that the locked file is still the one at the path, else retry.
  for (int attempt = 0;; ++attempt) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw InputError(path_ + ": cannot create the run's lock file (" + std::strerror(errno) +
                       "); choose a writable --out folder");
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      if (err == EWOULDBLOCK)
        throw ConfigError(dir + " is in use by another run (" + first_line(read_file(path_)) +
                          "); wait for it to finish, or pass --out NEW_DIR");
      throw InputError(path_ + ": cannot lock (" + std::strerror(err) + "); use a local folder for --out");
    }
    struct stat held {
    }, named{};
    if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev)
      break;
    ::close(fd_);
    fd_ = -1;
    if (attempt == 10)
      throw InputError(path_ + ": the lock file keeps changing; is another run starting and stopping?");
  }
  // Locked. Anything already in the file was written by a run that ended without removing it (killed).
  const std::string previous = read_file(path_);
  if (!previous.empty()) {
    log_warn("run", dir + ": taking over the lock left by a run that stopped without finishing (" +
                        first_line(previous) + ")");
    remove_stale_staging_under(dir);  // the model folders it was writing when it stopped
  }
  const std::string owner = owner_line() + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, owner.data(), owner.size(), 0) != static_cast<ssize_t>(owner.size()))
    log_warn("run", path_ + ": cannot record the owner (" + std::strerror(errno) + "); the lock still holds");
}

RunLock::~RunLock() {
  if (fd_ < 0) return;
  // Removed while still held (see the constructor's check), so no run ever takes a lock on a dead file.
  ::unlink(path_.c_str());
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
  remove_created();
}

}  // namespace hp::core
