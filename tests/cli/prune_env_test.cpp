// The pruning run against its environment and its choice (#44): with HOME an empty folder it leaves nothing
// there (tools/hf_check.py keeps transformers' modules cache private); a half-installed transformers 5 venv is
// skipped with one warning instead of failing stage 7; `--criteria random` chooses by random, and says so.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "core/base/process.h"
#include "skip.h"

using namespace hp::test;
namespace fs = std::filesystem;

namespace {

// Every path under `dir`, relative to it, one a line ("" when empty).
std::string listing(const fs::path& dir) {
  std::string out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) out += fs::relative(e.path(), dir).string() + "\n";
  return out;
}

// A Python that runs but cannot import torch: the system one without site-packages (-S), as bin/python of a
// venv whose pip install has not finished.
void write_python_without_torch(const fs::path& python) {
  fs::create_directories(python.parent_path());
  std::ofstream(python) << "#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n";
  fs::permissions(python, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
}

}  // namespace

TEST_CASE("the pruning run with HOME empty and a half-installed transformers 5 venv: one warning, HOME left empty",
          "[cli][prune][hf]") {
  const fs::path py = HP_REF_PYTHON;
  if (!fs::exists(py)) return skip("no Python reference at " + py.string() + " (scripts/setup.sh installs it)");
  const auto root = scratch_dir("hp_prune_home");
  fs::remove_all(root);
  const auto home = root / "home", cache = root / "cache", out = root / "run", tmp = root / "tmp";
  fs::create_directories(home);
  fs::create_directories(cache);
  fs::create_directories(tmp);
  // HEADPRUNE_CACHE holds the working transformers 4 venv and a venv-v5 that setup is still installing: its
  // python exists, cannot import torch, and the completion marker is not written yet.
  fs::create_directory_symlink(py.parent_path().parent_path(), cache / "venv");
  write_python_without_torch(cache / "venv-v5" / "bin" / "python");
  const auto r = run_command("env -u HP_PYTHON -u HP_PYTHON_V5 HOME=" + home.string() + " TMPDIR=" + tmp.string() +
                             " HEADPRUNE_CACHE=" + cache.string() + " " + HP_PRUNE_EXE + " " +
                             tiny_prune_args(out.string()) + " --criteria taylor --target-heads 3 --recover-steps 0");
  INFO(r.output);
  REQUIRE(r.code == 0);
  const std::string venv5 = (cache / "venv-v5").string();
  CHECK_THAT(r.output, Catch::Contains("warning [prune] stage 7: the transformers 5 venv " + venv5 +
                                       " is incomplete (no .headprune-complete: scripts/setup.sh --v5 is still "
                                       "installing it, or was interrupted); skipping its Hugging Face check; rerun "
                                       "`scripts/setup.sh --v5`"));
  const auto summary = nlohmann::json::parse(slurp(out / "summary.json"));
  const auto& hf = summary["final"]["hf_check"];
  CHECK_THAT(hf["transformers5_remote_code"].get<std::string>(), Catch::StartsWith("skipped (the transformers 5 venv"));
  // transformers 4 ran both ways with HOME empty, and left nothing there (its modules cache was private).
  CHECK_THAT(hf["transformers4"].get<std::string>(), Catch::StartsWith("passed"));
  CHECK_THAT(hf["transformers4_remote_code"].get<std::string>(), Catch::StartsWith("passed"));
  INFO("HOME holds:\n" << listing(home));
  CHECK(fs::is_empty(home));
  INFO("TMPDIR holds:\n" << listing(tmp));
  CHECK(fs::is_empty(tmp));  // the run's temporary files (the Python checks') are gone too
  CHECK(fs::is_empty(cache / "venv-v5" / "bin") == false);  // the venv itself untouched

  // The same Python once setup marked the venv complete (a broken venv): tools/hf_check.py exits 3 with one
  // line naming the module it cannot import, which stage 7 takes as "skip with a warning" (errors.prune-hf5-broken).
  std::ofstream(cache / "venv-v5" / hp::core::kVenvCompleteMarker);
  CHECK(hp::core::python_reference_incomplete((cache / "venv-v5" / "bin" / "python").string(),
                                              hp::core::PythonRef::kTransformers5)
            .empty());
  const auto check = run_command("HOME=" + home.string() + " " + (cache / "venv-v5" / "bin" / "python").string() +
                                 " " + kSourceDir + "/tools/hf_check.py " + (out / "model").string() + " " +
                                 (out / "verify_inputs.h5").string() + " --remote-code");
  INFO(check.output);
  CHECK(check.code == hp::core::kPythonCannotImport);
  CHECK_THAT(check.output, Catch::Contains("cannot import h5py") && Catch::Contains("rerun scripts/setup.sh"));
  CHECK(fs::is_empty(home));
}

TEST_CASE("prune --criteria random --target-heads N chooses by random (the one criterion asked for) and says why",
          "[cli][prune]") {
  const auto out = scratch_dir("hp_prune_random");
  fs::remove_all(out);
  const auto r = run_prune(tiny_prune_args(out.string()) + " --criteria random --target-heads 3 --recover-steps 0"
                                                           " --set prune.verify=false");
  INFO(r.output);
  REQUIRE(r.code == 0);
  // Only random is scored (taylor was scored too, and its heads kept, with no word of it).
  CHECK_THAT(r.output, Catch::Contains("scoring random") && !Catch::Contains("scoring taylor"));
  CHECK_THAT(r.output, Catch::Contains("stage 5/9 choose N: 3 heads by random (the only criterion scored"));
  const auto summary = nlohmann::json::parse(slurp(out / "summary.json"));
  CHECK(summary["final"]["criterion"] == "random");
  CHECK(summary["final"]["heads_kept"] == 3);
}

TEST_CASE("prune export --onnx of an FFN-slimmed model (loaded through remote code) leaves HOME empty",
          "[cli][export][onnx]") {
  const fs::path py = HP_REF_PYTHON;
  if (!fs::exists(py)) return skip("no Python reference at " + py.string() + " (scripts/setup.sh installs it)");
  const auto root = scratch_dir("hp_export_home");
  fs::remove_all(root);
  const auto home = root / "home";
  fs::create_directories(home);
  // Neurons 0-9 of layer 0 removed: config.json gets intermediate_sizes, which transformers builds only through
  // the folder's modeling file (tools/onnx_export.py loads it with trust_remote_code).
  const auto r = run_command("HOME=" + home.string() + " HP_PYTHON=" + py.string() + " " + HP_PRUNE_EXE +
                             " export --model " + kTinyBert + " --mask '0:1;f0:0-9' --onnx --to " +
                             (root / "out").string());
  INFO(r.output);
  if (r.code == 1 && r.output.find("onnxruntime is not installed") != std::string::npos)
    return skip("onnxruntime is not installed in " + py.string());
  REQUIRE(r.code == 0);
  REQUIRE(slurp(root / "out" / "config.json").find("intermediate_sizes") != std::string::npos);
  INFO("HOME holds:\n" << listing(home));
  // Nothing but headprune's own dispatch cache (core/kernels/dispatch_probe.h), which HEADPRUNE_CACHE would move.
  fs::remove(home / ".cache" / "headprune" / "dispatch.json");
  for (const auto* dir : {".cache/headprune", ".cache"})
    if (fs::exists(home / dir) && fs::is_empty(home / dir)) fs::remove(home / dir);
  CHECK(fs::is_empty(home));
}
