// Starting external programs (rsvg-convert, the Python reference) without a shell: the argument vector
// goes to posix_spawnp as is, so a path holding quotes, spaces or `;` is only ever a path.
#pragma once

#include <string>
#include <vector>

namespace hp::core {

// Runs argv[0] (searched in PATH) with `argv` and waits. Returns its exit status; 127 when it could not
// be started (not found), 128 + signal when killed. `quiet` sends its stdout and stderr to /dev/null.
int run_program(const std::vector<std::string>& argv, bool quiet = false);

// The reference Pythons: kTransformers4 is the pinned one (transformers 4.40, onnxruntime), made by
// scripts/setup_python.sh; kTransformers5 the optional one of `scripts/setup_python.sh --v5`.
// $HP_PYTHON (or $HP_PYTHON_V5), else $HEADPRUNE_CACHE/venv[-v5]/bin/python, else
// ~/.cache/headprune/venv[-v5]/bin/python. The path, existing or not.
enum class PythonRef { kTransformers4, kTransformers5 };
std::string python_reference(PythonRef which = PythonRef::kTransformers4);

// headprune's cache folder: $HEADPRUNE_CACHE, else ~/.cache/headprune (the reference venvs, the dispatch probe).
std::string cache_dir();

// The file scripts/setup_python.sh --v5 writes into its venv last, once torch, transformers and h5py import
// there: a venv-v5 folder without it is still being installed, or its install was interrupted.
inline constexpr const char* kVenvCompleteMarker = ".headprune-complete";

// Why the reference Python `python` of kind `which` is not ready to be run, or "" when it is (or is absent:
// callers test that first). Only kTransformers5 at setup's place (a venv folder named venv-v5) can be found
// incomplete: its bin/python exists without kVenvCompleteMarker beside bin/. One clause, naming the venv.
std::string python_reference_incomplete(const std::string& python, PythonRef which);

// The exit status of tools/hf_check.py (and the other reference scripts that say so) when its Python cannot
// import what it needs (torch, transformers, h5py): the venv is broken, not the model.
inline constexpr int kPythonCannotImport = 3;

// `argv` as one line for messages, each argument single-quoted where it needs it (never executed).
std::string format_command(const std::vector<std::string>& argv);

}  // namespace hp::core
