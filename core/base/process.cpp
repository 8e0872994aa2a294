// External programs without a shell (see core/base/process.h).
#include "core/base/process.h"

#include <cstdlib>
#include <filesystem>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include "core/base/errors.h"

extern char** environ;

namespace hp::core {

int run_program(const std::vector<std::string>& argv, bool quiet) {
  HP_CHECK(!argv.empty(), "run_program needs a program name");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return 127;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return 127;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 127;
}

std::string python_reference(PythonRef which) {
  const bool v5 = which == PythonRef::kTransformers5;
  if (const char* p = std::getenv(v5 ? "HP_PYTHON_V5" : "HP_PYTHON")) return p;
  return cache_dir() + (v5 ? "/venv-v5/bin/python" : "/venv/bin/python");
}

std::string cache_dir() {
  const char* cache = std::getenv("HEADPRUNE_CACHE");
  const char* home = std::getenv("HOME");
  return cache ? std::string(cache) : std::string(home ? home : "") + "/.cache/headprune";
}

std::string python_reference_incomplete(const std::string& python, PythonRef which) {
  namespace fs = std::filesystem;
  if (which != PythonRef::kTransformers5) return "";
  const fs::path venv = fs::path(python).parent_path().parent_path();  // VENV/bin/python -> VENV
  if (venv.filename() != "venv-v5" || fs::exists(venv / kVenvCompleteMarker)) return "";
  return "the transformers 5 venv " + venv.string() + " is incomplete (no " + kVenvCompleteMarker +
         ": scripts/setup.sh --v5 is still installing it, or was interrupted)";
}

std::string format_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain =
        !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,") ==
                          std::string::npos;
    out += plain ? a : "'" + a + "'";
  }
  return out;
}

}  // namespace hp::core
