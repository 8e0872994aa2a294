// Plots: the line chart (axis labels, one line of its own colour, legend entry and band per series, escaped
// text), the heatmap (its colour scale, blank absent heads, layer and head labels) and the PNG (rsvg-convert's
// image of the SVG, at its size); the conversion starts rsvg-convert without a shell, so a folder name holding
// quotes and `;` is a path, never a command (it used to be pasted into a std::system line).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "fixtures.h"
#include "core/base/log.h"
#include "core/base/process.h"
#include "core/base/xml.h"
#include "core/plot/plot.h"
#include "skip.h"

namespace fs = std::filesystem;

TEST_CASE("plots: a folder named with a quote and a command separator is only a path", "[prune][plot]") {
  const fs::path dir = hp::test::scratch_dir("hp plot 'x; touch hp_injected; echo '");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);  // an injected `touch hp_injected` would land here
  hp::core::Heatmap m;
  m.title = "t";
  m.values = {{0.1, 0.2}, {0.3, 0.4}};
  const std::string png = hp::core::write_svg_and_png((dir / "map.svg").string(), hp::core::svg_heatmap(m));
  fs::current_path(cwd);
  CHECK(fs::exists(dir / "map.svg"));
  CHECK(!fs::exists(dir / "hp_injected"));
  CHECK(!fs::exists(cwd / "hp_injected"));
  if (hp::core::run_program({"rsvg-convert", "--version"}, true) != 0) {
    hp::test::skip("rsvg-convert is not installed: no PNG to check");
    return;
  }
  REQUIRE(png == (dir / "map.png").string());
  CHECK(!fs::exists(png + ".tmp"));
  // A PNG (signature, then the IHDR chunk: big-endian width and height) at the SVG's size.
  std::ifstream in(png, std::ios::binary);
  std::string head(24, '\0');
  REQUIRE(in.read(&head[0], 24));
  CHECK(head.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
  CHECK(head.compare(12, 4, "IHDR") == 0);
  const auto be32 = [&](size_t at) {
    unsigned v = 0;
    for (size_t i = at; i < at + 4; ++i) v = v << 8 | static_cast<unsigned char>(head[i]);
    return v;
  };
  std::smatch size;
  const std::string svg = hp::core::svg_heatmap(m);
  REQUIRE(std::regex_search(svg, size, std::regex("<svg [^>]*width=\"(\\d+)\" height=\"(\\d+)\"")));
  CHECK(be32(16) == std::stoul(size[1]));
  CHECK(be32(20) == std::stoul(size[2]));
}

// A disk that fills while rsvg-convert writes (#61): it printed cairo's own error text and left map.png.tmp.
TEST_CASE("plots: a PNG conversion that fails leaves no partial PNG and no raw rsvg-convert text, one warning",
          "[prune][plot]") {
  const fs::path dir = hp::test::scratch_dir("hp_plot_fail");
  fs::remove_all(dir);
  fs::create_directories(dir / "bin");
  // A stand-in rsvg-convert that writes half a file (-o OUT is its 4th argument), complains and fails.
  std::ofstream(dir / "bin" / "rsvg-convert")
      << "#!/bin/sh\n[ \"$1\" = --version ] && exit 0\nprintf partial > \"$4\"\n"
         "echo 'RAW: error while writing to output stream' >&2\nexit 1\n";
  fs::permissions(dir / "bin" / "rsvg-convert", fs::perms::owner_all);
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", ((dir / "bin").string() + ":" + path).c_str(), 1);
  hp::core::init_logging(false);  // warnings on stderr, as the `prune` executable writes them
  std::fflush(stderr);
  const int saved = dup(2);
  const int log = open((dir / "stderr.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(log, 2);
  hp::core::Heatmap m;
  m.values = {{0.1, 0.2}, {0.3, 0.4}};
  const std::string png = hp::core::write_svg_and_png((dir / "map.svg").string(), hp::core::svg_heatmap(m));
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(log);
  setenv("PATH", path.c_str(), 1);
  CHECK(png.empty());
  CHECK(fs::exists(dir / "map.svg"));
  CHECK(!fs::exists(dir / "map.png.tmp"));
  CHECK(!fs::exists(dir / "map.png"));
  std::ifstream in(dir / "stderr.txt");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO(text);
  CHECK(text.find("RAW:") == std::string::npos);
  // Where a real rsvg-convert was found first, `write_svg_and_png` still ran the stand-in (it is looked up per call).
  CHECK(text.find((dir / "map.png").string() + " was not drawn (rsvg-convert exit 1)") != std::string::npos);
  CHECK(text.find((dir / "map.svg").string() + " is complete") != std::string::npos);
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

// Every match of `re` in `s`, as its capture groups.
std::vector<std::smatch> matches(const std::string& s, const std::regex& re) {
  return {std::sregex_iterator(s.begin(), s.end(), re), std::sregex_iterator()};
}

// R + G + B of "#rrggbb": smaller is darker.
int lightness(const std::string& color) {
  int sum = 0;
  for (int i = 1; i < 7; i += 2) sum += std::stoi(color.substr(i, 2), nullptr, 16);
  return sum;
}

}  // namespace

TEST_CASE("line chart: one line and legend entry per series, bands, escaped text, dashes past the palette", "[plot]") {
  hp::core::LineChart c;
  c.title = "a < b & c";
  for (int k = 0; k < 10; ++k) {
    hp::core::Series s{"head " + std::to_string(k), {0, 1, 2}, {0.1 * k, 0.2, 0.3}, {}, {}};
    if (k == 0) s.lo = {0, 0.1, 0.2}, s.hi = {0.2, 0.3, 0.4};
    c.series.push_back(s);
  }
  c.x_label = "heads pruned";
  c.y_label = "accuracy";
  c.y_ref = 0.25, c.y_ref_label = "unpruned";
  const std::string svg = hp::core::svg_line_chart(c);
  CHECK(count(svg, "<polyline") == 10);
  CHECK(count(svg, "<polygon") == 1);  // the one band
  CHECK_THAT(svg, Catch::Contains("a &lt; b &amp; c"));
  CHECK_THAT(svg, Catch::Contains(">head 9</text>"));
  // Axis labels: x under the plot, y turned upright beside it; the dashed reference line with its label.
  CHECK_THAT(svg, Catch::Contains("text-anchor=\"middle\">heads pruned</text>"));
  CHECK_THAT(svg, Catch::Contains("rotate(-90)\" text-anchor=\"middle\">accuracy</text>"));
  CHECK_THAT(svg, Catch::Contains("stroke-dasharray=\"5,4\"/>") && Catch::Contains(">unpruned</text>"));
  // One path per series, in order, each through its 3 points in its own colour (8 distinct, then repeated)
  // and with y growing upwards; the legend entry of each series has the colour of its line.
  const auto lines =
      matches(svg, std::regex("<polyline fill=\"none\" stroke=\"(#[0-9a-f]{6})\"[^>]* points=\"([^\"]*)\""));
  const auto legend =
      matches(svg, std::regex("stroke=\"(#[0-9a-f]{6})\" stroke-width=\"3\"[^>]*/><text [^>]*>([^<]*)</text>"));
  REQUIRE(lines.size() == 10);
  REQUIRE(legend.size() == 10);
  std::vector<std::string> colors;
  for (size_t k = 0; k < lines.size(); ++k) {
    INFO("series " << k);
    colors.push_back(lines[k][1]);
    CHECK(legend[k][1] == colors[k]);
    CHECK(legend[k][2] == "head " + std::to_string(k));
    std::vector<double> y;  // screen y of each point
    std::istringstream points(lines[k][2].str());
    for (std::string xy; points >> xy;) y.push_back(std::stod(xy.substr(xy.find(',') + 1)));
    REQUIRE(y.size() == 3);
    for (size_t i = 1; i < y.size(); ++i) CHECK((y[i] < y[i - 1]) == (c.series[k].y[i] > c.series[k].y[i - 1]));
  }
  CHECK(std::set<std::string>(colors.begin(), colors.begin() + 8).size() == 8);
  CHECK(colors[8] == colors[0]);
  CHECK(colors[9] == colors[1]);
  // 8 colours: series 8 and 9 repeat colours 0 and 1, so they (line and legend) are dashed, the first 8 are not.
  CHECK(count(svg, "stroke-dasharray=\"6,3\"") == 4);
}

TEST_CASE("heatmap: colour scale from white (lowest) to dark blue (highest), absent heads blank, labels", "[plot]") {
  hp::core::Heatmap m;
  m.title = "importance";
  m.values = {{0.1, 0.4, 0.25}, {0.7, 0.55, 9.0}};
  m.present = {{true, true, true}, {true, true, false}};  // 9.0 is an absent head's: outside the scale
  const std::string svg = hp::core::svg_heatmap(m);
  std::map<std::pair<int, int>, std::string> fill;  // (layer, head) -> the cell's colour
  const std::regex cell("fill=\"(#[0-9a-f]{6})\" stroke=\"white\"><title>layer (\\d+) head (\\d+): ");
  for (const auto& c : matches(svg, cell)) fill[{std::stoi(c[2]), std::stoi(c[3])}] = c[1];
  REQUIRE(fill.size() == 6);
  CHECK(fill[{0, 0}] == "#ffffff");  // the lowest present value
  CHECK(fill[{1, 0}] == "#1e55b4");  // the highest: 255 - (225, 170, 75)
  CHECK(fill[{1, 2}] == "#f0f0f0");  // absent
  // Darker with every larger value: 0.1 < 0.25 < 0.4 < 0.55 < 0.7.
  CHECK(lightness(fill[{0, 0}]) > lightness(fill[{0, 2}]));
  CHECK(lightness(fill[{0, 2}]) > lightness(fill[{0, 1}]));
  CHECK(lightness(fill[{0, 1}]) > lightness(fill[{1, 1}]));
  CHECK(lightness(fill[{1, 1}]) > lightness(fill[{1, 0}]));
  // The colour bar: 10 steps, lowest first (at the bottom), darker each step, its ends labelled.
  const auto bar = matches(svg, std::regex("width=\"16\" height=\"[^\"]*\" fill=\"(#[0-9a-f]{6})\""));
  REQUIRE(bar.size() == 10);
  for (size_t i = 1; i < bar.size(); ++i) CHECK(lightness(bar[i][1]) < lightness(bar[i - 1][1]));
  CHECK_THAT(svg, Catch::Contains(">0.7</text>") && Catch::Contains(">0.1</text>"));
  // A row label per layer, a column label per head, the axis name and the title.
  CHECK_THAT(svg, Catch::Contains(">layer 0</text>") && Catch::Contains(">layer 1</text>"));
  CHECK(matches(svg, std::regex("text-anchor=\"middle\">([0-9])</text>")).size() == 3);
  CHECK_THAT(svg, Catch::Contains(">head</text>") && Catch::Contains(">importance</text>"));
}

TEST_CASE("xml_escape covers text and double-quoted attributes", "[plot]") {
  CHECK(hp::core::xml_escape(R"(<a href="x">&</a>)") == "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;");
}
