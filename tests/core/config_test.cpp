// Config binding: YAML, --set, dump → load round trip, unknown keys with suggestions, type errors
// with file:line:col, and validate().
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>  // getpid

#include "core/base/config.h"
#include "core/base/errors.h"
#include "core/base/run_folder.h"

using Catch::Contains;

namespace {
std::string write_tmp(const std::string& name, const std::string& text) {
  std::string path = "/tmp/hp_cfg_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}
}  // namespace

TEST_CASE("YAML and --set fill the typed structs", "[core][config]") {
  hp::core::Config cfg;
  hp::core::load_yaml(cfg, write_tmp("ok.yaml", "data:\n  task: mrpc\n  max_seq_len: 64\neval:\n  batch_size: 8\n"));
  CHECK(cfg.data.task == "mrpc");
  CHECK(cfg.data.max_seq_len == 64);
  CHECK(cfg.eval.batch_size == 8);
  hp::core::apply_set(cfg, "eval.batch_size=16");
  CHECK(cfg.eval.batch_size == 16);
  CHECK(cfg.run.seed == 42);  // untouched default
}

TEST_CASE("dump_yaml then load_yaml gives the same config", "[core][config]") {
  hp::core::Config a;
  a.data.task = "stsb";
  a.run.seed = 7;
  a.eval.mask = "1:2,3";
  a.infer.hidden = true;
  hp::core::Config b;
  hp::core::load_yaml(b, write_tmp("dump.yaml", hp::core::dump_yaml(a)));
  CHECK(hp::core::dump_yaml(a) == hp::core::dump_yaml(b));
  CHECK(b.eval.mask == "1:2,3");
  CHECK(b.infer.hidden);
}

TEST_CASE("config errors name the key, the place and the fix", "[core][config][bad]") {
  hp::core::Config cfg;
  REQUIRE_THROWS_WITH(hp::core::load_yaml(cfg, write_tmp("typo.yaml", "eval:\n  batch_sise: 8\n")),
                      Contains(":2:3: unknown key 'eval.batch_sise'; did you mean 'eval.batch_size'?"));
  REQUIRE_THROWS_WITH(hp::core::load_yaml(cfg, write_tmp("type.yaml", "data:\n  max_seq_len: long\n")),
                      Contains("type.yaml:2:16: data.max_seq_len: expected an integer, got 'long'"));
  REQUIRE_THROWS_WITH(hp::core::load_yaml(cfg, "/nonexistent.yaml"), Contains("cannot open config file"));
  REQUIRE_THROWS_WITH(hp::core::apply_set(cfg, "eval.batch"), Contains("expected key=value"));
  REQUIRE_THROWS_WITH(hp::core::apply_set(cfg, "eval.bach_size=3"), Contains("did you mean 'eval.batch_size'"));
  cfg.eval.batch_size = 0;
  REQUIRE_THROWS_WITH(hp::core::validate(cfg), Contains("eval.batch_size = 0"));
  REQUIRE_THROWS_AS(hp::core::validate(cfg), hp::ConfigError);
}

TEST_CASE("config_doc lists every key once", "[core][config]") {
  std::string doc = hp::core::config_doc();
  hp::core::Config cfg;
  for (const auto& f : hp::core::config_fields(cfg)) {
    INFO(f.path);
    CHECK(doc.find("`" + f.path + "`") != std::string::npos);
  }
}

namespace {
// `text` without the line of key `name` (e.g. "max_drop:"): a config saved by a build before the key existed.
std::string without_line(const std::string& text, const std::string& name) {
  const auto at = text.find("\n  " + name);
  REQUIRE(at != std::string::npos);
  return text.substr(0, at) + text.substr(text.find('\n', at + 1));
}
}  // namespace

TEST_CASE("config_diff: changed values by key, keys a later build added at their defaults apart", "[core][config]") {
  using hp::core::config_diff;
  hp::core::Config cfg;
  cfg.data.task = "mrpc";
  const std::string now = hp::core::dump_yaml(cfg);
  CHECK(config_diff(now, now).changed.empty());
  CHECK(config_diff(now, now).added_at_default.empty());
  // Saved before prune.max_drop existed; this run has it at its default: resumable, the key named.
  const std::string before = without_line(now, "max_drop:");
  REQUIRE(before.size() < now.size());
  auto d = config_diff(before, now);
  CHECK(d.changed.empty());
  CHECK(d.added_at_default == std::vector<std::string>{"prune.max_drop"});
  // The same key set away from its default is a change: the interrupted run did not run with it.
  cfg.prune.max_drop = 1;
  d = config_diff(before, hp::core::dump_yaml(cfg));
  CHECK(d.changed == std::vector<std::string>{"prune.max_drop: (absent) -> 1"});
  CHECK(d.added_at_default.empty());
  // A changed value, and a key the current build no longer has.
  cfg = hp::core::Config{};
  cfg.data.task = "sst2";
  d = config_diff(now, without_line(hp::core::dump_yaml(cfg), "max_drop:"));
  CHECK(d.changed == std::vector<std::string>{"data.task: \"mrpc\" -> \"sst2\"", "prune.max_drop: 0 -> (absent)"});
  // Help comments are not values: a build that rewords one still resumes.
  std::string reworded = now;
  const auto help = reworded.find("  # ");
  reworded.insert(help + 4, "reworded ");
  d = config_diff(now, reworded);
  CHECK(d.changed.empty());
  CHECK(d.added_at_default.empty());
}

TEST_CASE("a pruning run folder started before a key existed resumes with the key at its default", "[core][config]") {
  namespace fs = std::filesystem;
  const fs::path dir = "/tmp/hp_cfg_" + std::to_string(getpid()) + "_run";
  fs::remove_all(dir);
  fs::create_directories(dir / "state");
  hp::core::Config cfg;
  const std::string now = hp::core::dump_yaml(cfg);
  std::ofstream(dir / "state" / "config.yaml") << without_line(now, "max_drop:");
  std::ofstream(dir / "curves.csv") << "x\n";  // finished work: not a fresh folder
  using hp::core::RunKind;
  CHECK(hp::core::claim_run_folder(dir.string(), RunKind::kPruning, now));  // resumed
  cfg.prune.max_drop = 1;
  CHECK_THROWS_WITH(hp::core::claim_run_folder(dir.string(), RunKind::kPruning, hp::core::dump_yaml(cfg)),
                    Contains("holds another pruning run (its config differs: prune.max_drop: (absent) -> 1)"));
  fs::remove_all(dir);
}

TEST_CASE("a training run killed before its first record was renamed into place starts afresh", "[core][config]") {
  // The folder a SIGKILL leaves between write_file_atomic's write and its rename: the dead run's lock and
  // config.resolved.yaml.tmp (stops.kill_resume_gates met it on CI).
  namespace fs = std::filesystem;
  const fs::path dir = "/tmp/hp_cfg_" + std::to_string(getpid()) + "_killed";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / hp::core::kRunLockFile) << "pid 4194305 on vm, since 2026-11-29 20:30:02 UTC\n";
  std::ofstream(dir / "config.resolved.yaml.tmp") << "model:\n";
  const std::string yaml = hp::core::dump_yaml(hp::core::Config{});
  {
    const hp::core::RunLock lock(dir.string());
    CHECK(!fs::exists(dir / "config.resolved.yaml.tmp"));
    CHECK_FALSE(hp::core::claim_run_folder(dir.string(), hp::core::RunKind::kTraining, yaml));  // a new run
  }
  // The pruning run's first record is state/config.yaml: the kill leaves state/ holding its .tmp.
  fs::create_directories(dir / "state");
  std::ofstream(dir / hp::core::kRunLockFile) << "pid 4194305 on vm, since 2026-11-29 20:30:02 UTC\n";
  std::ofstream(dir / "state" / "config.yaml.tmp") << "model:\n";
  {
    const hp::core::RunLock lock(dir.string());
    CHECK(fs::is_empty(dir / "state"));
    CHECK_FALSE(hp::core::claim_run_folder(dir.string(), hp::core::RunKind::kPruning, yaml));
  }
  fs::remove_all(dir / "state");
  // A file of the user's that is no writer's leftover still makes the folder foreign.
  std::ofstream(dir / "notes.txt") << "mine\n";
  {
    const hp::core::RunLock lock(dir.string());
    CHECK_THROWS_WITH(hp::core::claim_run_folder(dir.string(), hp::core::RunKind::kTraining, yaml),
                      Contains("is not empty and holds no training run"));
  }
  fs::remove_all(dir);
}
