// `--config NAME` as users write it (`prune --config mnli.yaml --target-heads 36`): a name that is not a
// file is looked up among the shipped configs (beside an installed binary, then the source tree's
// configs/), and `prune config --list` lists them.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cli/cli_util.h"

namespace fs = std::filesystem;
using hp::test::run_command;
using hp::test::run_prune;

namespace {

// A scratch folder holding no configs/, to run prune from.
fs::path scratch(const std::string& name) {
  const fs::path dir = hp::test::scratch_dir("hp_config_lookup_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string in(const fs::path& dir, const std::string& command) { return "cd '" + dir.string() + "' && " + command; }

// The names of configs/*.yaml in the source tree.
std::set<std::string> shipped_names() {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(fs::path(HP_SOURCE_DIR) / "configs"))
    if (e.path().extension() == ".yaml") names.insert(e.path().stem().string());
  return names;
}

}  // namespace

TEST_CASE("config lookup: --config NAME finds the shipped config from a folder without it, with or without .yaml",
          "[cli][config]") {
  const fs::path dir = scratch("name");
  for (const std::string name : {"mnli.yaml", "mnli"}) {
    auto r = run_command(in(dir, std::string(HP_PRUNE_EXE) + " --config " + name + " --dump-config"));
    INFO(r.output);
    CHECK(r.code == 0);
    CHECK_THAT(r.output, Catch::Contains("task: \"mnli_subset\""));
    CHECK_THAT(r.output,
               Catch::Contains("using the shipped " + (fs::path(HP_SOURCE_DIR) / "configs" / "mnli.yaml").string()));
  }
}

TEST_CASE("config lookup: --config NAME: a file of that name in the current folder comes first", "[cli][config]") {
  const fs::path dir = scratch("local");
  std::ofstream(dir / "mnli.yaml") << "data:\n  task: sst2\n";
  auto r = run_command(in(dir, std::string(HP_PRUNE_EXE) + " --config mnli.yaml --dump-config"));
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("task: \"sst2\""));
  CHECK_THAT(r.output, !Catch::Contains("using the shipped"));
}

TEST_CASE("config lookup: --config NAME that is neither a file nor shipped: one line naming the shipped configs",
          "[cli][config]") {
  const fs::path dir = scratch("unknown");
  auto r = run_command(in(dir, std::string(HP_PRUNE_EXE) + " --config nosuch.yaml --dump-config"));
  std::string names;
  for (const auto& n : shipped_names()) names += (names.empty() ? "" : ", ") + n;
  CHECK(r.code == 2);
  CHECK(r.output ==
        "error: nosuch.yaml: cannot open config file: no such file here, and no shipped config of that name (" + names +
            "); `prune config --list` lists them\n");
  // A path (with a slash) is never looked up elsewhere: the error names the path.
  r = run_prune("--config ./nosuch.yaml --dump-config");
  CHECK(r.code == 2);
  CHECK_THAT(r.output,
             Catch::Contains("error: ./nosuch.yaml: cannot open config file; check the path passed to --config"));
}

TEST_CASE("config lookup: prune config --list lists every shipped config with its path and what it runs",
          "[cli][config]") {
  auto r = run_prune("config --list");
  INFO(r.output);
  REQUIRE(r.code == 0);
  std::istringstream lines(r.output);
  std::set<std::string> listed;
  for (std::string line; std::getline(lines, line);) {
    const auto tab = line.find('\t'), tab2 = line.find('\t', tab + 1);
    REQUIRE(tab2 != std::string::npos);
    const std::string name = line.substr(0, tab), path = line.substr(tab + 1, tab2 - tab - 1);
    CHECK(fs::equivalent(path, fs::path(HP_SOURCE_DIR) / "configs" / (name + ".yaml")));
    CHECK(line.size() > tab2 + 10);  // the config's own description
    listed.insert(name);
  }
  CHECK(listed == shipped_names());
}

TEST_CASE("config lookup: an installed prune finds the configs installed beside it", "[cli][config]") {
  const fs::path prefix = scratch("prefix");
  auto r = run_command("cmake --install '" + std::string(HP_BINARY_DIR) + "' --prefix '" + prefix.string() + "'");
  INFO(r.output);
  REQUIRE(r.code == 0);
  const fs::path exe = prefix / "bin" / "prune";
  REQUIRE(fs::exists(exe));
  r = run_command(in(scratch("installed_cwd"), exe.string() + " --config sst2 --dump-config"));
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("using the shipped " +
                                       (prefix / "share" / "headprune" / "configs" / "sst2.yaml").string()));
  r = run_command(exe.string() + " config --list");
  CHECK_THAT(r.output, Catch::Contains("sst2\t" + (prefix / "share" / "headprune" / "configs" / "sst2.yaml").string()));
  fs::remove_all(prefix);
}
