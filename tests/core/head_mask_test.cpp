// Head mask specs: parsing, printing, files, and the errors users see for bad specs.
#include <catch2/catch.hpp>

#include <fstream>
#include <unistd.h>  // getpid

#include "core/base/errors.h"
#include "core/model/head_mask.h"

using Catch::Contains;

TEST_CASE("mask spec parses to the heads it names", "[core][mask]") {
  auto keep = hp::core::parse_head_mask("2:0,3;5:11", 6, 12);
  CHECK(hp::core::count_kept(keep) == 72 - 3);
  CHECK_FALSE(keep[2][0]);
  CHECK_FALSE(keep[2][3]);
  CHECK_FALSE(keep[5][11]);
  CHECK(keep[2][1]);
  CHECK(hp::core::format_head_mask(keep) == "2:0,3;5:11");
  CHECK(hp::core::count_kept(hp::core::parse_head_mask("", 6, 12)) == 72);
  CHECK(hp::core::format_head_mask(hp::core::parse_head_mask(" 0 : 1 , 2 ; ", 2, 4)) == "0:1,2");
}

TEST_CASE("mask spec from a file, one group per line with comments", "[core][mask]") {
  std::string path = "/tmp/hp_mask_test_" + std::to_string(getpid()) + ".txt";
  std::ofstream(path) << "# heads pruned by taylor\n1:0,1\n3:2  # layer 3\n";
  auto keep = hp::core::parse_head_mask(path, 4, 4);
  CHECK(hp::core::format_head_mask(keep) == "1:0,1;3:2");
}

TEST_CASE("bad mask specs name the group and the fix", "[core][mask][bad]") {
  REQUIRE_THROWS_WITH(hp::core::parse_head_mask("2:x", 6, 12), Contains("'2:x': head 'x' is not a number"));
  REQUIRE_THROWS_WITH(hp::core::parse_head_mask("7:0", 6, 12),
                      Contains("layer 7 is out of range; the model has 6 layers"));
  REQUIRE_THROWS_WITH(hp::core::parse_head_mask("1:12", 6, 12), Contains("head 12 is out of range"));
  REQUIRE_THROWS_WITH(hp::core::parse_head_mask("1-3;2:1", 6, 12), Contains("'1-3' has no ':'"));
  REQUIRE_THROWS_WITH(hp::core::parse_head_mask("nosuchfile", 6, 12), Contains("neither a mask spec"));
  REQUIRE_THROWS_AS(hp::core::parse_head_mask("2:x", 6, 12), hp::ConfigError);
}

TEST_CASE("FFN neuron groups and ranges: parse, print back, refused where only heads are taken", "[core][mask]") {
  const auto m = hp::core::parse_mask("1:0-2;f0:3,5-7;f1:0", 2, 4, 10);
  CHECK(hp::core::count_kept(m.heads) == 8 - 3);
  CHECK(m.heads[1] == std::vector<bool>{false, false, false, true});
  CHECK(m.neurons[0] == std::vector<bool>{true, true, true, false, true, false, false, false, true, true});
  CHECK(hp::core::count_kept(m.neurons) == 20 - 5);
  CHECK(hp::core::format_mask(m) == "1:0,1,2;f0:3,5-7;f1:0");
  CHECK(hp::core::parse_mask(hp::core::format_mask(m), 2, 4, 10).neurons == m.neurons);
  REQUIRE_THROWS_WITH(hp::core::parse_mask("f0:10", 2, 4, 10), Contains("neuron 10 is out of range"));
  REQUIRE_THROWS_WITH(hp::core::parse_mask("f0:5-2", 2, 4, 10), Contains("the range 5-2 is empty"));
  REQUIRE_THROWS_WITH(hp::core::parse_mask("f2:1", 2, 4, 10), Contains("layer 2 is out of range"));
  REQUIRE_THROWS_WITH(hp::core::parse_head_mask("f0:1", 2, 4), Contains("masks FFN neurons; this takes head groups"));
}

TEST_CASE("whole layers: a \"layers:\" group removes them with their heads and neurons; printed back; refusals",
          "[core][mask][layers]") {
  const auto m = hp::core::parse_mask("layers:1,3-4;0:2;f0:1-2", 6, 4, 10);
  CHECK(m.layers == std::vector<bool>{true, false, true, false, false, true});
  CHECK(hp::core::count_kept_layers(m.layers, 6) == 3);
  CHECK(hp::core::count_kept(m.heads) == 3 * 4 - 1);  // a removed layer's heads go with it
  CHECK(hp::core::count_kept(m.neurons) == 3 * 10 - 2);
  CHECK(hp::core::format_mask(m) == "0:2;f0:1-2;layers:1,3-4");  // its heads and neurons are not listed again
  const auto back = hp::core::parse_mask(hp::core::format_mask(m), 6, 4, 10);
  CHECK(back.layers == m.layers);
  CHECK(back.heads == m.heads);
  CHECK(back.neurons == m.neurons);
  CHECK(hp::core::parse_mask("0:1", 6, 4, 10).layers.empty());  // nothing removed: every layer kept
  // Costs count the units of kept layers only: 11 heads × 3 + 28 neurons × 1.
  CHECK(hp::core::structure_cost(m, {3, 1}) == 11 * 3 + 28);
  REQUIRE_THROWS_WITH(hp::core::parse_mask("layers:6", 6, 4, 10), Contains("layer 6 is out of range"));
  REQUIRE_THROWS_WITH(hp::core::parse_mask("layers:0-5", 6, 4, 10), Contains("removes all 6 layers; keep at least one"));
  REQUIRE_THROWS_WITH(hp::core::parse_mask("layers:", 6, 4, 10), Contains("names no layers after the ':'"));
  REQUIRE_THROWS_WITH(hp::core::parse_head_mask("layers:2", 6, 4), Contains("removes whole layers"));
}
