// Starting external programs (rsvg-convert, the Python reference) without a shell: the argument vector
// goes to posix_spawnp as is, so a path holding quotes, spaces or `;` is only ever a path.
#pragma once

#include <string>
#include <vector>

namespace hp::core {

// Runs argv[0] (searched in PATH) with `argv` and waits. Returns its exit status; 127 when it could not
// be started (not found), 128 + signal when killed. `quiet` sends its stdout and stderr to /dev/null.
int run_program(const std::vector<std::string>& argv, bool quiet = false);

// The reference Python (transformers, onnxruntime): $HP_PYTHON, else $HEADPRUNE_CACHE/venv/bin/python,
// else ~/.cache/headprune/venv/bin/python (scripts/setup_python.sh makes it). The path, existing or not.
std::string python_reference();

// `argv` as one line for messages, each argument single-quoted where it needs it (never executed).
std::string format_command(const std::vector<std::string>& argv);

}  // namespace hp::core
