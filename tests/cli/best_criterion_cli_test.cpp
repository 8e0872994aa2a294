// prune.method best on a task run (prune/stages/stages.h best_criterion): with --target-heads N every curve point is
// also scored on the selection slice, and the criterion chosen is the one with the highest mean there (random
// aside), so that no choice reads the evaluation split; a named criterion draws the curves on the evaluation split
// alone.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_util.h"

using hp::test::run_prune;
using hp::test::slurp;
using hp::test::tiny_prune_args;

namespace fs = std::filesystem;

namespace {

// curves.csv as rows of column → text.
std::vector<std::map<std::string, std::string>> read_rows(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  for (std::stringstream ss(line); std::getline(ss, line, ',');) header.push_back(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    std::map<std::string, std::string> row;
    std::stringstream ss(line);
    for (const auto& h : header) std::getline(ss, row[h], ',');
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

TEST_CASE("prune.method best chooses the criterion on the selection slice, not on the evaluation split",
          "[cli][prune]") {
  const auto out = hp::test::scratch_dir("hp_prune_best_slice");
  fs::remove_all(out);
  const std::string args = tiny_prune_args(out.string()) + " --target-heads 3 --recover-steps 0" +
                           " --set prune.criteria=[taylor,lrp,random] --set train.train_split=matched";
  auto r = run_prune(args);
  INFO(r.output);
  REQUIRE(r.code == 0);
  std::map<std::string, std::vector<double>> on_slice;
  for (const auto& row : read_rows(out / "curves.csv")) {
    REQUIRE(row.count("select_accuracy"));
    on_slice[row.at("criterion")].push_back(std::stod(row.at("select_accuracy")));
  }
  double top = -1;
  std::vector<std::string> best;  // the criteria with the highest mean on the slice, random aside
  for (const auto& [c, v] : on_slice) {
    if (c == "random") continue;
    double mean = 0;
    for (double x : v) mean += x / static_cast<double>(v.size());
    if (mean > top + 1e-12) top = mean, best = {c};
    else if (mean > top - 1e-12) best.push_back(c);
  }
  const auto summary = nlohmann::json::parse(slurp(out / "summary.json"));
  CHECK_THAT(r.output, Catch::Contains("mismatched examples and " + summary["select_split"].get<std::string>() + "'s"));
  const std::string chosen = summary["final"]["criterion"].get<std::string>();
  CHECK(std::count(best.begin(), best.end(), chosen) == 1);

  // A named criterion reads no slice: its curves are the evaluation split's alone.
  const auto named = hp::test::scratch_dir("hp_prune_best_named");
  fs::remove_all(named);
  auto n = run_prune(tiny_prune_args(named.string()) + " --target-heads 3 --recover-steps 0 --method taylor" +
                     " --set prune.criteria=[taylor]");
  INFO(n.output);
  REQUIRE(n.code == 0);
  CHECK(read_rows(named / "curves.csv").at(0).count("select_accuracy") == 0);
}
