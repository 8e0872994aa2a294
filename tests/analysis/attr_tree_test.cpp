// Hao et al.'s attribution tree (analysis/attr_tree.h): a hand-built case and the trees of the Python
// re-implementation (tests/golden/make_tree_goldens.py) from the same attribution matrices.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/attr_tree.h"
#include "fixtures.h"
#include "skip.h"

using hp::analysis::attribution_tree;
using hp::analysis::Matrix;

namespace {

Matrix filled(int S, double v) { return Matrix(S, std::vector<double>(S, v)); }

}  // namespace

TEST_CASE("attribution tree: a hand-built three-layer case", "[attr_tree]") {
  // Token 2 carries the most attribution (root, height 2/3). Layer 1 (= L − 2): 2 → 3. Layer 0: 2 → 0 (2 is
  // fixed: 0 goes to the lowest height, 0) and 3 → 1 (3 was open: 1 hangs one layer below 3, whose own
  // height Hao's construction never set, so (0·3 − 1)/3).
  Matrix l0 = filled(4, 0.1), l1 = filled(4, 0.1), l2 = filled(4, 0.1);
  l0[2][0] = 1.0, l0[3][1] = 0.8;
  l1[2][3] = 1.0;
  const auto t = attribution_tree({l0, l1, l2}, 0.4);
  CHECK(t.root == 2);
  REQUIRE(t.edges.size() == 3);
  CHECK((t.edges[0].layer == 1 && t.edges[0].from == 2 && t.edges[0].to == 3));
  CHECK((t.edges[1].layer == 0 && t.edges[1].from == 2 && t.edges[1].to == 0));
  CHECK((t.edges[2].layer == 0 && t.edges[2].from == 3 && t.edges[2].to == 1));
  CHECK(t.edges[2].score == Approx(0.8));
  CHECK(t.heights == std::vector<double>{0.0, -1.0 / 3, 2.0 / 3, 0.0});

  // At exactly the threshold an entry is dropped (Hao: proportion *= proportion > threshold), so the
  // later `< threshold` test skips it: 2 → 1 in layer 0 (layer 0's largest entry is 1) is no edge at 0.4
  // and is one at 0.41, where it takes token 1 before 3 → 1 can.
  l0[2][1] = 0.4;
  const auto u = attribution_tree({l0, l1, l2}, 0.4);
  REQUIRE(u.edges.size() == 3);
  CHECK((u.edges[2].from == 3 && u.edges[2].to == 1));
  l0[2][1] = 0.41;
  const auto w = attribution_tree({l0, l1, l2}, 0.4);
  REQUIRE(w.edges.size() == 3);
  CHECK((w.edges[2].layer == 0 && w.edges[2].from == 2 && w.edges[2].to == 1));
}

TEST_CASE("attribution tree: equals the Python re-implementation of Hao's algorithm", "[attr_tree][golden]") {
  std::ifstream f(hp::test::kTreeGolden);
  if (!f) return hp::test::skip(hp::test::kTreeGolden + " missing: run tests/golden/make_tree_goldens.py");
  const auto g = nlohmann::json::parse(f);
  const double tau = g["threshold"];
  int edges = 0;
  for (const auto& ex : g["examples"]) {
    const auto att = ex["attribution"].get<std::vector<Matrix>>();
    const auto t = attribution_tree(att, tau);
    INFO(ex["tokens"].dump());
    CHECK(t.root == ex["root"].get<int>());
    REQUIRE(t.edges.size() == ex["edges"].size());
    for (size_t k = 0; k < t.edges.size(); ++k) {
      const auto& e = ex["edges"][k];
      CHECK(t.edges[k].layer == e[0].get<int>());
      CHECK(t.edges[k].from == e[1].get<int>());
      CHECK(t.edges[k].to == e[2].get<int>());
      CHECK(t.edges[k].score == Approx(e[3].get<double>()).epsilon(1e-12));
    }
    const auto h = ex["heights"].get<std::vector<double>>();
    REQUIRE(t.heights.size() == h.size());
    for (size_t i = 0; i < h.size(); ++i) CHECK(t.heights[i] == Approx(h[i]).margin(1e-12));
    edges += static_cast<int>(t.edges.size());
  }
  CHECK(edges > 0);
}
