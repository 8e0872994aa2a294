// Atomic file writes (see core/base/files.h).
#include "core/base/files.h"

#include <fcntl.h>
#include <signal.h>  // kill(pid, 0): is a staging folder's writer alive
#include <sys/stat.h>  // mkdir
#include <unistd.h>

#include <cerrno>
#include <cstdio>  // renameat2, RENAME_EXCHANGE
#include <cstdlib>  // strtol
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/base/errors.h"  // InputError

namespace hp::core {
namespace fs = std::filesystem;

void prepare_output_file(const std::string& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);  // follows symlinks: a link to /dev/null is a device too
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    const std::string kind = fs::is_directory(st)                                 ? "a folder"
                             : fs::is_character_file(st) || fs::is_block_file(st) ? "a device"
                                                                                  : "not a regular file";
    throw InputError(path + ": is " + kind + ", and results are written only to regular files; name a file path");
  }
  const fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) return;
  fs::create_directories(parent, ec);
  if (ec || !fs::is_directory(parent))
    throw InputError(path + ": cannot create its folder " + parent.string() + " (" +
                     (ec ? ec.message() : "not a folder") + "); choose a writable location");
}

void commit_output_file(const std::string& tmp, const std::string& path) {
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (!ec) return;
  const std::string reason = ec.message();
  fs::remove(tmp, ec);
  throw InputError(path + ": cannot replace it with " + tmp + " (" + reason + "); check the folder is writable");
}

namespace {

// What to do about a failed write, by its cause: "free disk space" helps a full disk, not a read-only one.
std::string write_fix(int err) {
  switch (err) {
    case EROFS: return "the file system is read-only: choose a folder on a writable disk";
    case EACCES:
    case EPERM: return "check the folder's permissions, or choose a writable folder";
    default: return "free disk space or choose a writable folder";  // ENOSPC, EDQUOT, EIO
  }
}

// The folders above `path` that do not exist yet, deepest first.
std::vector<fs::path> missing_parents(const std::string& path) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::path p = fs::absolute(path, ec).lexically_normal().parent_path();
       !p.empty() && p != p.parent_path() && !fs::exists(p, ec); p = p.parent_path())
    out.push_back(p);
  return out;
}

void write_bytes_atomic(const std::string& path, const void* bytes, std::size_t size) {
  const std::vector<fs::path> created = missing_parents(path);
  prepare_output_file(path);
  const std::string tmp = path + ".tmp";
  // POSIX calls rather than a stream: the error names the reason (a full disk, a read-only folder), and
  // fsync makes the renamed file complete even after a crash of the machine, not only of the process.
  // A failed write leaves nothing behind: not the .tmp, nor the folders made for it.
  auto fail = [&](const char* what, int fd) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    std::error_code ec;
    for (const auto& d : created)
      if (!fs::remove(d, ec)) break;
    throw InputError(path + ": cannot " + what + " " + tmp + " (" + std::strerror(err) + "); " + write_fix(err));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("create", -1);
  const auto* p = static_cast<const char*>(bytes);
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, p + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write", fd);
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("write", fd);
  if (::close(fd) != 0) fail("write", -1);
  commit_output_file(tmp, path);
}

}  // namespace

void write_file_atomic(const std::string& path, const void* bytes, std::size_t size) {
  shared_write([&] { write_bytes_atomic(path, bytes, size); });
}

void write_file_atomic(const std::string& path, const std::string& content) {
  write_file_atomic(path, content.data(), content.size());
}

namespace {
SharedWriteFn g_shared_write = nullptr;
SharedDecideFn g_shared_decide = nullptr;
thread_local int g_write_depth = 0;
}  // namespace

void set_shared_write(SharedWriteFn write, SharedDecideFn decide) {
  g_shared_write = write;
  g_shared_decide = decide;
}

void write_own_file(const std::function<void()>& write) {
  ++g_write_depth;
  try {
    write();
  } catch (...) {
    --g_write_depth;
    throw;
  }
  --g_write_depth;
}

long shared_decide(const std::function<long()>& decide) {
  if (!g_shared_decide || g_write_depth > 0) return decide();
  return g_shared_decide(decide);
}

void shared_write(const std::function<void()>& write) {
  if (!g_shared_write || g_write_depth > 0) return write();
  struct Depth {
    Depth() { ++g_write_depth; }
    ~Depth() { --g_write_depth; }
  } depth;
  g_shared_write(write);
}

namespace {
// A staging folder's writer pid when `name` is one (".NAME.tmp-PID-N", or its ".old"), else 0.
long staging_pid(const std::string& name) {
  const size_t at = name.rfind(".tmp-");
  if (name.size() < 2 || name[0] != '.' || at == std::string::npos || at == 0) return 0;
  char* end = nullptr;
  const long pid = std::strtol(name.c_str() + at + 5, &end, 10);
  return end && *end == '-' ? pid : 0;
}

bool writer_gone(long pid) {
  return pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// Removes the staging folders of `target` (.NAME.tmp-PID-N, and their .old) whose writer is no longer running: a
// run killed while it wrote one leaves it behind, and the next writer of the same target clears it.
void remove_stale_staging(const fs::path& target) {
  const fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const std::string prefix = "." + target.filename().string() + ".tmp-";
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && writer_gone(staging_pid(name))) stale.push_back(e.path());
  }
  for (const auto& p : stale) fs::remove_all(p, ec);
}
}  // namespace

void remove_stale_staging_under(const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // write_file_atomic's NAME.tmp: only a writer of this folder makes one, and none is alive (the caller holds
    // the folder's lock, taken over from a killed run).
    const bool atomic_tmp = it->is_regular_file(ec) && name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0;
    if (!atomic_tmp && (!it->is_directory(ec) || !writer_gone(staging_pid(name)))) continue;
    stale.push_back(it->path());
    if (!atomic_tmp) it.disable_recursion_pending();
  }
  for (const auto& p : stale) fs::remove_all(p, ec);
}

namespace {
// `p` absolute, with "." and ".." and links resolved as far as it exists.
fs::path resolved(const std::string& p) {
  std::error_code ec;
  auto out = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? fs::absolute(p, ec).lexically_normal() : out;
}
// Whether `inner` is `outer` or lies under it.
bool within(const fs::path& inner, const fs::path& outer) {
  const fs::path rel = inner.lexically_relative(outer);
  return !rel.empty() && *rel.begin() != "..";
}
}  // namespace

void refuse_replacing_inputs(const std::string& target, const std::vector<ReadPath>& inputs) {
  const fs::path t = resolved(target);
  std::error_code ec;
  const fs::path cwd = resolved(fs::current_path(ec).string());
  if (!ec && within(cwd, t))
    throw ConfigError(target + (cwd == t ? " is the current folder" : " holds the current folder (" + cwd.string() + ")") +
                      ", which a folder written whole cannot replace; name a new folder, e.g. " +
                      (t / "export").lexically_relative(cwd).string() + ", or run from another folder");
  for (const auto& in : inputs) {
    if (in.path.empty()) continue;
    const fs::path p = resolved(in.path);
    if (p != t && within(p, t))
      throw ConfigError(target + " holds " + in.label + " (" + in.path + "), which replacing the folder would delete; "
                        "name a folder outside it");
  }
}

StagedFolder::StagedFolder(const std::string& target) : target_(target) {
  while (target_.size() > 1 && target_.back() == '/') target_.pop_back();
  refuse_replacing_inputs(target_);
  std::error_code ec;
  if (fs::is_symlink(target_, ec)) target_ = fs::canonical(target_, ec).string();  // the folder it names, link kept
  const auto st = fs::status(target_, ec);
  if (fs::exists(st) && !fs::is_directory(st))
    throw InputError(target_ + ": is not a folder; name a folder (a new one, or an earlier export to replace)");
  for (const auto& p : missing_parents(target_)) created_.push_back(p.string());
  const fs::path t(target_);
  const fs::path parent = t.parent_path();
  auto fail = [&](const std::string& reason) {
    discard();
    throw InputError(target_ + ": cannot create a folder in " + (parent.empty() ? std::string(".") : parent.string()) +
                     " (" + reason + "); choose a writable location");
  };
  if (!parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec) fail(ec.message());
  }
  remove_stale_staging(t);
  // ::mkdir rather than mkdtemp: the name says whose folder it is, and the call is the one libc exports.
  for (int n = 0;; ++n) {
    path_ = (parent / ("." + t.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(n)))
                .string();
    if (::mkdir(path_.c_str(), 0755) == 0) return;
    const int err = errno;
    path_.clear();
    if (err != EEXIST || n >= 100) fail(std::strerror(err));
  }
}

// Rethrows the exception in flight with the staging folder's path written as the target's in its message: the
// staging folder is gone when the message is read, and the target is what the user named.
namespace {
[[noreturn]] void rethrow_naming(const std::string& staged, const std::string& target) {
  auto named = [&](std::string m) {
    for (size_t at = m.find(staged); at != std::string::npos; at = m.find(staged, at + target.size()))
      m.replace(at, staged.size(), target);
    return m;
  };
  try {
    throw;
  } catch (const ConfigError& e) {
    throw ConfigError(named(e.what()));
  } catch (const InputError& e) {
    throw InputError(named(e.what()));
  } catch (const CheckpointError& e) {
    throw CheckpointError(named(e.what()));
  } catch (const InternalError& e) {
    throw InternalError(named(e.what()));
  } catch (const Error& e) {
    throw Error(named(e.what()));
  } catch (const fs::filesystem_error& e) {  // a raw one from a writer (copy_file, create_directories)
    throw InputError(named(e.what()) + "; check that " + target + " is on a writable disk with room");
  }
}
}  // namespace

void StagedFolder::write(const std::function<void(const std::string& dir)>& fill) {
  try {
    fill(path_);
  } catch (...) {
    const std::string staged = path_;
    discard();
    path_.clear();
    rethrow_naming(staged, target_);
  }
  commit();
}

StagedFolder::~StagedFolder() {
  if (!committed_) discard();
}

void StagedFolder::discard() noexcept {
  std::error_code ec;
  if (!path_.empty()) fs::remove_all(path_, ec);
  for (const auto& d : created_)  // deepest first; a folder that is not empty (someone else's) stays
    if (!fs::remove(d, ec)) break;
}

void StagedFolder::commit() {
  std::error_code ec;
  auto fail = [&](const std::string& reason) {
    throw InputError(target_ + ": cannot put the new content in place from " + path_ + " (" + reason +
                     "); check the folder is writable");
  };
  if (!fs::exists(target_, ec)) {
    if (::rename(path_.c_str(), target_.c_str()) != 0) fail(std::strerror(errno));
    path_.clear();
  } else if (::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) fail(std::strerror(errno));
    // No exchange on this file system: the old content moves aside first, and back if the second rename fails.
    const std::string old = path_ + ".old";
    if (::rename(target_.c_str(), old.c_str()) != 0) fail(std::strerror(errno));
    if (::rename(path_.c_str(), target_.c_str()) != 0) {
      const std::string reason = std::strerror(errno);
      ::rename(old.c_str(), target_.c_str());
      fail(reason);
    }
    path_ = old;
  }
  committed_ = true;
  if (!path_.empty()) fs::remove_all(path_, ec);  // after an exchange: the old content
  path_.clear();
  // The renames themselves survive a crash of the machine once the parent folder is synced.
  const std::string parent = fs::path(target_).parent_path().string();
  const int fd = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot read; check the path");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace hp::core
