// `prune report` end to end on the tiny model: a pruning run, its analysis and a gated run in one offline
// page (every panel, the slimmed model beside the original, trees), the same bytes twice, one-line errors
// for bad input, and the page opened in headless Chromium (tests/report/browser_check.py: no console
// errors, no request leaving the file, a click on a head changes the drawn lines, screenshots).
#include <catch2/catch.hpp>
#include <cstdint>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "skip.h"

using namespace hp::test;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> unbase64_zlib(const std::string& b64, size_t expected) {
  std::vector<uint8_t> z;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : b64) {
    if (c == '=') break;
    const char* at = std::strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", c);
    REQUIRE(at != nullptr);
    acc = acc << 6 | static_cast<uint32_t>(at - "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
    if ((bits += 6) >= 8) z.push_back(static_cast<uint8_t>(acc >> (bits -= 8)));
  }
  std::vector<uint8_t> out(expected);
  uLongf size = expected;
  REQUIRE(uncompress(out.data(), &size, z.data(), z.size()) == Z_OK);
  REQUIRE(size == expected);
  return out;
}

// The tiny pruning run (3 of 8 heads kept), its analysis with --prune-run, and a gated training run.
struct Fixture {
  fs::path root = hp::test::scratch_dir("hp_report_cli");
  fs::path run = root / "run", analysis = root / "run_analysis", gated = root / "gated";
  Fixture() {
    // Several test processes (ctest -j) build or read it: one builds while the others wait.
    fs::create_directories(root.parent_path());
    const int lock = ::open((root.string() + ".lock").c_str(), O_CREAT | O_RDWR, 0644);
    REQUIRE(lock >= 0);
    REQUIRE(::flock(lock, LOCK_EX) == 0);
    build();
    ::close(lock);  // releases the lock
  }
  void build() {
    if (fs::exists(run / "summary.json") && fs::exists(analysis / "analysis.json") && fs::exists(gated / "run.h5"))
      return;
    fs::remove_all(root);
    auto r = run_prune(tiny_prune_args(run.string()) + " --target-heads 3 --method taylor --recover-steps 0");
    INFO(r.output);
    REQUIRE(r.code == 0);
    auto a = run_prune("analyze --model " + kTinyBert + " --task mnli_subset --max-seq-len 32 --data-root " +
                       tiny_data_root() + " --split mismatched --examples 12 --batch 4 --prune-run " + run.string() +
                       " --out " + analysis.string());
    INFO(a.output);
    REQUIRE(a.code == 0);
    auto g = run_prune("train --model " + kTinyBert + " --task mnli_subset --data-root " + tiny_data_root() +
                       " --set train.train_split=matched --set train.eval_split=mismatched --max-seq-len 32"
                       " --target-flops 0.6 --max-steps 4 --out " +
                       gated.string());
    INFO(g.output);
    REQUIRE(g.code == 0);
  }
  // Writes the report of all three folders to root/NAME (REQUIREs success) and returns its path.
  fs::path page(const std::string& name) const {
    const auto out = root / name;
    auto r = run_prune(args(out.string()));
    INFO(r.output);
    REQUIRE(r.code == 0);
    return out;
  }
  std::string args(const std::string& out) const {
    return "report " + run.string() + " " + analysis.string() + " " + gated.string() + " --data-root " +
           tiny_data_root() +
           " --max-seq-len 32 --split mismatched --examples 0,4 --text \"the movie was great\" --text-b \"it was good\""
           " --set prune.attattr_steps=3 --out " +
           out;
  }
};

// The #hp-data object of a page.
nlohmann::json page_data(const std::string& html) {
  const auto begin = html.find("<script type=\"application/json\" id=\"hp-data\">");
  REQUIRE(begin != std::string::npos);
  const auto from = html.find('>', begin) + 1;
  return nlohmann::json::parse(html.substr(from, html.find("</script>", from) - from));
}

}  // namespace

TEST_CASE("prune report: every panel from a pruning run, its analysis and a gated run; the same bytes twice",
          "[cli][report]") {
  Fixture fx;
  const std::string html = slurp(fx.page("report.html"));
  for (const char* id :
       {"summary", "curves", "importance", "roles", "headmap", "gates", "attention", "tree", "rollout"})
    CHECK_THAT(html, Catch::Contains(std::string("<section id=\"panel-") + id + "\""));
  // Static panels drawn from the folders, not notes.
  for (const char* fig : {"fig-curves", "fig-importance-taylor", "fig-rank-correlation", "fig-role-map", "fig-head-map",
                          "fig-gates-0-layer1", "fig-gates-0-structures", "fig-tree-2"})
    CHECK_THAT(html, Catch::Contains(std::string("id=\"") + fig + "\""));
  CHECK_THAT(html, Catch::Contains("3 of 8"));
  // Nothing is loaded from outside the file (the browser test watches the requests themselves).
  for (const char* link : {"src=\"http", "href=\"http", "url(http", "url(\"http", "@import", "<link"})
    CHECK_THAT(html, !Catch::Contains(link));
  const auto data = page_data(html);
  CHECK(data["layers"] == 2);
  CHECK(data["heads"] == 4);
  CHECK(data["has_slim"] == true);
  CHECK(data["pruned"].size() == 5);
  REQUIRE(data["examples"].size() == 3);
  CHECK(data["examples"][2]["name"] == "text");
  for (const auto& ex : data["examples"]) {
    const size_t n = ex["tokens"].size();
    const auto attn = unbase64_zlib(ex["attn"], 2 * 4 * n * n);
    const auto slim = unbase64_zlib(ex["slim_attn"], 2 * 4 * n * n);
    for (int lh = 0; lh < 8; ++lh) {
      const bool removed = std::any_of(data["pruned"].begin(), data["pruned"].end(),
                                       [&](const auto& p) { return p[0] == lh / 4 && p[1] == lh % 4; });
      for (size_t i = 0; i < n; ++i) {
        int row = 0, slim_row = 0;
        for (size_t j = 0; j < n; ++j) row += attn[(lh * n + i) * n + j], slim_row += slim[(lh * n + i) * n + j];
        // Each row of 8-bit probabilities sums to 255 up to rounding (½ per entry).
        CHECK(std::abs(row - 255) <= static_cast<int>(n / 2 + 1));
        if (removed) CHECK(slim_row == 0);
        else CHECK(std::abs(slim_row - 255) <= static_cast<int>(n / 2 + 1));
      }
    }
  }
  // Deterministic: the same inputs give the same bytes.
  CHECK(slurp(fx.page("again.html")) == html);
}

TEST_CASE("prune report: bad input gives a one-line error or a note, never a broken page", "[cli][report][bad]") {
  Fixture fx;
  const auto out = fx.root / "bad.html";
  fs::remove(out);
  const std::string base =
      "report " + fx.run.string() + " --data-root " + tiny_data_root() + " --max-seq-len 32 --out " + out.string();
  std::string long_text;
  for (int i = 0; i < 10; ++i) long_text += "the movie was great ";
  const std::vector<ErrorCase> cases = {
      {base + " --split mismatched --examples 99",
       "report.examples holds 99 but mnli_subset/mismatched has 30 rows; use 0..29", 2},
      {base + " --count 0 --text \"" + long_text + "\"",
       "word pieces with [CLS]/[SEP], more than data.max_seq_len = 32", 1},
      {"report " + (fx.root / "nowhere").string() + " --out " + out.string(), "nowhere: no such folder", 1},
      {"report " + tiny_data_root() + " --out " + out.string(), "holds no headprune output", 1},
      {"report --out " + out.string(), "name the folders to show", 2},
      {base + " --count 0 --set data.task=rte", "data.task = rte but the folders are a mnli_subset run", 2},
  };
  check_errors(cases, "", out);
  // A pruning run killed before its curves: the page is written, the curves panel says why they are missing.
  const auto killed = fx.root / "killed";
  fs::remove_all(killed);
  fs::create_directories(killed / "state" / "points");
  auto r = run_prune("report " + killed.string() + " " + fx.analysis.string() + " --data-root " + tiny_data_root() +
                     " --max-seq-len 32 --split mismatched --count 1 --out " + out.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(slurp(out), Catch::Contains(killed.string() + " has no curves"));
  // A summary.json edited by hand: valid JSON, a field of another type. One line naming the file, no page.
  const auto edited = fx.root / "edited";
  fs::remove_all(edited);
  fs::copy(fx.run, edited, fs::copy_options::recursive);
  auto summary = nlohmann::json::parse(slurp(edited / "summary.json"));
  summary["final"]["mask"] = 5;
  std::ofstream(edited / "summary.json") << summary.dump();
  fs::remove(out);
  check_errors({{"report " + edited.string() + " --data-root " + tiny_data_root() +
                     " --max-seq-len 32 --count 1 --out " + out.string(),
                 (edited / "summary.json").string() + ": a field is not what `prune` writes there", 1}},
               "", out);
}

TEST_CASE("prune report: 8 examples of 128 tokens on a 6 × 12 model stay under 15 MB", "[cli][report][minilm]") {
  const std::string model = kMiniLM;
  const std::string sst2 = kSharedData + "/glue/SST-2/dev.tsv";
  if (!fs::exists(model + "/config.json") || !fs::exists(sst2))
    return skip("MiniLM or SST-2 dev missing: run scripts/setup.sh");
  // Eight texts of dev sentences run together, 120 words each (about 128 word pieces with [CLS]/[SEP]).
  std::ifstream in(sst2);
  std::string line, words;
  std::vector<std::string> texts;
  int count = 0;
  std::getline(in, line);  // header
  while (texts.size() < 8 && std::getline(in, line)) {
    std::istringstream ws(line.substr(0, line.find('\t')));
    for (std::string w; ws >> w && count < 110; ++count) words += w + " ";
    if (count == 110) texts.push_back(words), words.clear(), count = 0;
  }
  REQUIRE(texts.size() == 8);
  const auto root = hp::test::scratch_dir("hp_report_size");
  fs::create_directories(root);
  std::ofstream(root / "texts.txt") << texts[0] << "\n"
                                    << texts[1] << "\n"
                                    << texts[2] << "\n"
                                    << texts[3] << "\n"
                                    << texts[4] << "\n"
                                    << texts[5] << "\n"
                                    << texts[6] << "\n"
                                    << texts[7] << "\n";
  auto r = run_prune("report --model " + model + " --task sst2 --count 0 --texts " + (root / "texts.txt").string() +
                     " --max-seq-len 160 --out " + (root / "report.html").string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  const std::string html = slurp(root / "report.html");
  const auto data = page_data(html);
  size_t tokens = 0;
  for (const auto& ex : data["examples"]) tokens += ex["tokens"].size();
  CHECK(data["layers"] == 6);
  CHECK(data["heads"] == 12);
  INFO("tokens " << tokens << ", bytes " << html.size());
  CHECK(tokens >= 8 * 120);
  CHECK(html.size() < 15'000'000);
  WARN("report of 8 examples, " << tokens << " tokens in all, 6 x 12 heads: " << html.size() / 1e6 << " MB");
}

TEST_CASE("prune report: headless Chromium renders it offline, and a click on a head changes the lines",
          "[cli][report][browser]") {
  Fixture fx;
  const auto page = fx.page("browser.html");
  browser_check(page, "hp_report_shots");
}

TEST_CASE("prune report of a budget run: the budget result, its curves and the Pareto plot, in Chromium too",
          "[cli][report][budget][browser]") {
  const auto root = hp::test::scratch_dir("hp_report_budget");
  fs::remove_all(root);
  const auto run = root / "run", page = root / "budget.html";
  auto r = run_prune(tiny_prune_args(run.string()) +
                     " --criteria taylor --target-flops 0.5 --recover-steps 0 --set prune.latency=true"
                     " --set prune.latency_batch=4 --set prune.budget_schedule=100,60,30");
  INFO(r.output);
  REQUIRE(r.code == 0);
  auto p = run_prune("report " + run.string() + " --data-root " + tiny_data_root() +
                     " --max-seq-len 32 --split mismatched --examples 0 --out " + page.string());
  INFO(p.output);
  REQUIRE(p.code == 0);
  const std::string html = slurp(page);
  const auto summary = nlohmann::json::parse(slurp(run / "summary.json"));
  CHECK_THAT(html, Catch::Contains("<h3>Budget result</h3>") && Catch::Contains("FFN neurons kept") &&
                       Catch::Contains("after the rearranged step") && Catch::Contains("id=\"fig-budget-curves\"") &&
                       Catch::Contains("id=\"fig-pareto\"") && Catch::Contains("heads only: taylor"));
  // Every method's line is drawn: the legend names each.
  for (const char* method : {"kwon-search", "kwon-rearranged", "kwon-tuned", "taylor-search", "magnitude-search",
                             "random-search"})
    CHECK_THAT(html, Catch::Contains(std::string(">") + method + "<"));
  int neurons = summary["final"]["budget"]["neurons_kept"];
  CHECK_THAT(html, Catch::Contains(std::to_string(neurons) + " of " +
                                   std::to_string(summary["final"]["budget"]["neurons_total"].get<int>())));
  browser_check(page, "hp_report_budget_shots");
}

TEST_CASE("prune report: a slimmed model that lost every head of a layer says so in Chromium, other layers draw",
          "[cli][report][browser]") {
  const auto root = hp::test::scratch_dir("hp_report_layer_gone");
  fs::remove_all(root);
  const auto slim = root / "slim", page = root / "gone.html";
  auto e = run_prune("export --model " + kTinyBert + " --mask '0:0,1,2,3;1:3' --to " + slim.string());
  INFO(e.output);
  REQUIRE(e.code == 0);
  auto r = run_prune("report --model " + kTinyBert + " --slim " + slim.string() + " --task mnli_subset --data-root " +
                     tiny_data_root() + " --max-seq-len 32 --split mismatched --examples 0 --out " + page.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto data = page_data(slurp(page));
  CHECK(data["has_slim"] == true);
  CHECK(data["pruned"].size() == 5);
  // browser_check.py: layer 0 (shown first) draws no slimmed line and the .hv-empty words; layer 1 draws lines.
  browser_check(page, "hp_report_layer_gone_shots");
}
