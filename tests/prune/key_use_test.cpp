// prune/run/key_use.h: every prune.* key walked against every mode of the pruning run; a key set in a mode that does not
// use it is named in a warning (#61).
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "core/base/config.h"
#include "prune/run/key_use.h"

namespace {

using hp::core::PruneConfig;

// The modes of the pruning run, each as the flags a user gives.
struct Mode {
  const char* flags;
  std::function<void(PruneConfig&)> set;
};
const std::vector<Mode>& modes() {
  static const std::vector<Mode> m = {
      {"(curves only)", [](PruneConfig&) {}},
      {"--target-heads 6", [](PruneConfig& p) { p.target_heads = 6; }},
      {"--target-layers 1", [](PruneConfig& p) { p.target_layers = 1; }},
      {"--target-flops 0.5", [](PruneConfig& p) { p.target_flops = 0.5; }},
      {"--target-params 0.5", [](PruneConfig& p) { p.target_params = 0.5; }},
      {"--target-latency 5", [](PruneConfig& p) { p.target_latency = 5; }},
      {"--max-drop 1", [](PruneConfig& p) { p.max_drop = 1; }},
      {"--method gates --target-flops 0.5", [](PruneConfig& p) { p.method.kind = hp::core::MethodKind::kGates, p.target_flops = 0.5; }},
      {"--target-heads 6 --set prune.latency=false", [](PruneConfig& p) { p.target_heads = 6, p.latency = false; }},
  };
  return m;
}

// Sets the field `key` of `p` to a value other than its default (whatever its type).
struct Change {
  std::string key;
  template <class T>
  void operator()(const char* k, T& v, const char*) {
    if (k == key) v = other(v);
  }
  static int other(int v) { return v + 1; }
  static double other(double v) { return v + 0.25; }
  static bool other(bool v) { return !v; }
  static std::string other(const std::string& v) { return v + "x"; }
  static hp::core::Objective other(hp::core::Objective v) {
    return v == hp::core::Objective::kTask ? hp::core::Objective::kEmbedding : hp::core::Objective::kTask;
  }
  static hp::core::Method other(const hp::core::Method& v) {
    return {v == hp::core::MethodKind::kKwon ? hp::core::MethodKind::kBest : hp::core::MethodKind::kKwon, ""};
  }
  static std::vector<int> other(const std::vector<int>& v) { return v.empty() ? std::vector<int>{1} : std::vector<int>{}; }
  static std::vector<std::string> other(const std::vector<std::string>& v) {
    return v.empty() ? std::vector<std::string>{"x"} : std::vector<std::string>{};
  }
};

bool named(const std::vector<std::string>& lines, const std::string& key) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind("prune." + key + " ", 0) == 0; });
}

const hp::prune::KeyUse* row_of(const std::string& key) {
  for (const auto& r : hp::prune::key_use_table())
    if (r.key == key) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("every prune.* key has a row of prune/run/key_use.cpp, and a row names a key that exists", "[prune][key_use]") {
  const auto keys = hp::prune::prune_keys();
  REQUIRE(keys.size() > 30);
  for (const auto& key : keys) {
    INFO("prune." << key << " has no row in prune/run/key_use.cpp: say which modes use it (#61)");
    CHECK(row_of(key) != nullptr);
  }
  for (const auto& r : hp::prune::key_use_table()) {
    INFO("the row " << r.key << " names no key of core::PruneConfig");
    CHECK(std::count(keys.begin(), keys.end(), std::string(r.key)) == 1);
  }
}

TEST_CASE("each key set in each mode: used, or named in a warning that says who uses it; never both", "[prune][key_use]") {
  for (const auto& mode : modes()) {
    PruneConfig base;
    mode.set(base);
    CHECK(hp::prune::unused_settings(base).empty());  // a mode's own flags draw no warning
    for (const auto& key : hp::prune::prune_keys()) {
      const auto* row = row_of(key);
      if (!row) continue;  // the case above fails
      PruneConfig p = base;
      Change change{key};
      p.visit_fields(change);
      const auto lines = hp::prune::unused_settings(p);
      INFO(mode.flags << " with prune." << key << " changed: " << (lines.empty() ? "(no warning)" : lines.front()));
      if (row->used(p)) {
        CHECK(!named(lines, key));
      } else {
        CHECK(named(lines, key));
        CHECK(std::string(row->only).size() > 3);  // the warning says who would use it
      }
    }
  }
}

// The cases of #61, by hand (independent of the table): each was accepted and silently ignored.
TEST_CASE("the silent options of #61 are warned about: structures with --target-heads, hidden_widths without hidden, "
          "frontier keys without --max-drop, layer_choice without --target-layers",
          "[prune][key_use]") {
  PruneConfig heads;
  heads.target_heads = 6;
  heads.structures = {"heads", "neurons", "hidden"};
  CHECK(named(hp::prune::unused_settings(heads), "structures"));

  PruneConfig flops;
  flops.target_flops = 0.5;
  flops.hidden_widths = {24};
  CHECK(named(hp::prune::unused_settings(flops), "hidden_widths"));
  flops.structures = {"heads", "neurons", "hidden"};
  CHECK(hp::prune::unused_settings(flops).empty());
  flops.layer_counts = {1};
  CHECK(named(hp::prune::unused_settings(flops), "layer_counts"));

  PruneConfig curves;
  curves.frontier_precisions = {"int8"};
  curves.layer_choice = "top";
  const auto lines = hp::prune::unused_settings(curves);
  CHECK(named(lines, "frontier_precisions"));
  CHECK(named(lines, "layer_choice"));
  CHECK(lines.size() == 2);
  CHECK(std::count(lines.begin(), lines.end(),
                   "prune.frontier_precisions is set but this run does not use it: only --max-drop D does") == 1);

  // --max-drop scores prune.frontier_criteria ([taylor]) in place of prune.criteria: attattr's keys are unused there.
  PruneConfig frontier;
  frontier.max_drop = 1;
  frontier.attattr_steps = 5;
  CHECK(named(hp::prune::unused_settings(frontier), "attattr_steps"));
  frontier.frontier_criteria = {};  // [] = prune.criteria, attattr among them
  CHECK_FALSE(named(hp::prune::unused_settings(frontier), "attattr_steps"));
}
