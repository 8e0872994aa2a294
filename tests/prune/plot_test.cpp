// Plots: the line chart (one line, legend entry and band per series, escaped text); the PNG conversion starts rsvg-convert without a shell, so a folder name holding quotes and `;`
// is a path, never a command (it used to be pasted into a std::system line).
#include <catch2/catch.hpp>

#include <filesystem>

#include "core/base/process.h"
#include "core/base/xml.h"
#include "prune/plot.h"
#include "skip.h"

namespace fs = std::filesystem;

TEST_CASE("plots: a folder named with a quote and a command separator is only a path", "[prune][plot]") {
  const fs::path dir = fs::temp_directory_path() / "hp plot 'x; touch hp_injected; echo '";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);  // an injected `touch hp_injected` would land here
  hp::prune::Heatmap m;
  m.title = "t";
  m.values = {{0.1, 0.2}, {0.3, 0.4}};
  const std::string png = hp::prune::write_svg_and_png((dir / "map.svg").string(), hp::prune::svg_heatmap(m));
  fs::current_path(cwd);
  CHECK(fs::exists(dir / "map.svg"));
  CHECK(!fs::exists(dir / "hp_injected"));
  CHECK(!fs::exists(cwd / "hp_injected"));
  if (hp::core::run_program({"rsvg-convert", "--version"}, true) != 0) {
    hp::test::skip("rsvg-convert is not installed: no PNG to check");
    return;
  }
  REQUIRE(png == (dir / "map.png").string());
  CHECK(fs::file_size(png) > 100);
  CHECK(!fs::exists(png + ".tmp"));
}

TEST_CASE("run_program: exit status, missing program, arguments passed verbatim", "[core][process]") {
  CHECK(hp::core::run_program({"true"}) == 0);
  CHECK(hp::core::run_program({"false"}) == 1);
  CHECK(hp::core::run_program({"hp-no-such-program-xyz"}) == 127);
  CHECK(hp::core::run_program({"test", "a'b;c", "=", "a'b;c"}) == 0);  // one argument each, no shell
  CHECK(hp::core::format_command({"python", "/a b/c", "--tol", "1e-4"}) == "python '/a b/c' --tol 1e-4");
}

namespace {

long count(const std::string& s, const std::string& what) {
  long n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("line chart: one line and legend entry per series, bands, escaped text, dashes past the palette", "[plot]") {
  hp::prune::LineChart c;
  c.title = "a < b & c";
  for (int k = 0; k < 10; ++k) {
    hp::prune::Series s{"head " + std::to_string(k), {0, 1, 2}, {0.1 * k, 0.2, 0.3}, {}, {}};
    if (k == 0) s.lo = {0, 0.1, 0.2}, s.hi = {0.2, 0.3, 0.4};
    c.series.push_back(s);
  }
  const std::string svg = hp::prune::svg_line_chart(c);
  CHECK(count(svg, "<polyline") == 10);
  CHECK(count(svg, "<polygon") == 1);  // the one band
  CHECK_THAT(svg, Catch::Contains("a &lt; b &amp; c"));
  CHECK_THAT(svg, Catch::Contains(">head 9</text>"));
  // 8 colours: series 8 and 9 repeat colours 0 and 1, so they (line and legend) are dashed, the first 8 are not.
  CHECK(count(svg, "stroke-dasharray=\"6,3\"") == 4);
}

TEST_CASE("xml_escape covers text and double-quoted attributes", "[plot]") {
  CHECK(hp::core::xml_escape(R"(<a href="x">&</a>)") == "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;");
}
