// The data behind `prune report`'s views (analysis/report/report_views.h, analysis/report/report_panels.h): the query
// and key vectors reproduce the model's attention (the neuron view's maths), a slimmed model's heads sit
// at their original indices, rollout is computed from the attention shown, the encoding matches Python's
// zlib + base64, and folders are sorted or refused with one-line errors.
#include <catch2/catch.hpp>
#include <torch/types.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "analysis/report/report_panels.h"
#include "analysis/report/report_views.h"
#include "analysis/rollout.h"
#include "core/io/checkpoint.h"
#include "core/base/errors.h"
#include "core/text/tokenizer.h"
#include "fixtures.h"
#include "prune/export/slim.h"
#include "skip.h"

namespace {

using hp::test::kTinyBert;

hp::core::Example pair(const std::string& a, const std::string& b) {
  hp::core::Example e;
  e.text_a = a, e.text_b = b;
  return e;
}

}  // namespace

TEST_CASE("report views: softmax(q·k/√d) of the stored vectors is the attention; rollout of it", "[report]") {
  const auto model = hp::core::load_bert(kTinyBert, {});
  const auto tok = hp::core::Tokenizer::from_model_dir(kTinyBert);
  const auto& task = hp::core::find_task("mnli_subset");
  hp::analysis::ViewSettings s;
  s.max_seq_len = 64;
  s.tree = false;
  const auto v =
      hp::analysis::view_example(model, nullptr, tok, task, pair("the movie was great", "it was good"), "x", s);
  REQUIRE(v.n == static_cast<int>(v.tokens.size()));
  CHECK(v.tokens.front() == "[CLS]");
  CHECK(v.segments.back() == 1);
  CHECK(v.segments.front() == 0);
  const auto q = torch::from_blob(const_cast<float*>(v.q.data()), {v.L, v.H, v.n, v.Dh});
  const auto k = torch::from_blob(const_cast<float*>(v.k.data()), {v.L, v.H, v.n, v.Dh});
  const auto a = torch::from_blob(const_cast<float*>(v.attn.data()), {v.L, v.H, v.n, v.n});
  const auto p = torch::softmax(torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(v.Dh)), -1);
  CHECK((p - a).abs().max().item<float>() < 1e-5);
  CHECK((a.sum(-1) - 1).abs().max().item<float>() < 1e-5);
  const auto r = hp::analysis::attention_rollout(v.attn, v.L, v.H, v.n);
  CHECK(r == v.rollout);
  CHECK(!v.prediction.empty());
  CHECK(v.probability > 1.0 / 3 - 1e-9);
}

TEST_CASE("report views: a slimmed model's heads at their original indices, removed heads empty", "[report]") {
  const auto model = hp::core::load_bert(kTinyBert, {});
  const auto tok = hp::core::Tokenizer::from_model_dir(kTinyBert);
  hp::core::HeadSet keep = {{false, true, false, true}, {true, false, false, false}};
  const auto slim = hp::prune::slim_model(model, keep);
  hp::analysis::ViewSettings s;
  s.max_seq_len = 64;
  s.tree = false;
  const auto v = hp::analysis::view_example(model, &slim, tok, hp::core::find_task("mnli_subset"),
                                            pair("i love this film", "he is funny"), "x", s);
  REQUIRE(v.has_slim);
  const size_t nn = static_cast<size_t>(v.n) * v.n;
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 4; ++h) {
      CHECK(v.slim_kept[l * 4 + h] == keep[l][h]);
      float diff = 0, mass = 0;
      for (size_t i = 0; i < nn; ++i) {
        diff = std::max(diff, std::fabs(v.slim_attn[(l * 4 + h) * nn + i] - v.attn[(l * 4 + h) * nn + i]));
        mass += v.slim_attn[(l * 4 + h) * nn + i];
      }
      if (!keep[l][h]) CHECK(mass == 0.0f);
      // Layer 0 sees the same input in both models: a kept head's attention is unchanged there.
      if (l == 0 && keep[l][h]) CHECK(diff < 1e-6f);
    }
  CHECK(v.slim_rollout == hp::analysis::attention_rollout(v.slim_attn, 2, 4, v.n, v.slim_kept));
}

TEST_CASE("report views: text longer than max_seq_len is refused, not truncated", "[report]") {
  const auto model = hp::core::load_bert(kTinyBert, {});
  const auto tok = hp::core::Tokenizer::from_model_dir(kTinyBert);
  hp::analysis::ViewSettings s;
  s.max_seq_len = 8;
  s.tree = false;
  CHECK_THROWS_WITH(hp::analysis::view_example(model, nullptr, tok, hp::core::find_task("mnli_subset"),
                                               pair("the movie was great", "it was good"), "text 1", s),
                    Catch::Contains("text 1: 10 word pieces") && Catch::Contains("max_seq_len = 8"));
}

TEST_CASE("report encoding: 8-bit quantisation and zlib + base64 equal Python's", "[report]") {
  CHECK(hp::analysis::quantize_unit({0.0f, 1.0f, 0.5f, -0.1f, 1.7f, 0.002f}) ==
        std::vector<uint8_t>{0, 255, 128, 0, 255, 1});
  std::vector<uint8_t> bytes;
  for (int i = 0; i < 700; ++i) bytes.push_back(static_cast<uint8_t>((i * 37) % 251));
  const std::string ours = hp::analysis::base64_zlib(bytes);
  FILE* p = popen(
      "python3 -c \"import zlib, base64, sys; sys.stdout.write(base64.b64encode(zlib.compress(bytes((i * 37) % 251 "
      "for i in range(700)), 9)).decode())\" 2>/dev/null",
      "r");
  std::string py;
  std::array<char, 4096> buf{};
  size_t n;
  while (p && (n = fread(buf.data(), 1, buf.size(), p)) > 0) py.append(buf.data(), n);
  const int rc = p ? pclose(p) : -1;
  if (rc != 0 || py.empty()) return hp::test::skip("python3 not found: cannot compare with Python's zlib/base64");
  CHECK(ours == py);
}

TEST_CASE("report folders: sorted by content, one-line errors for the rest", "[report][bad]") {
  namespace fs = std::filesystem;
  const auto root = hp::test::scratch_dir("hp_report_folders");
  fs::remove_all(root);
  fs::create_directories(root / "empty");
  fs::create_directories(root / "analysis");
  std::ofstream(root / "analysis" / "analysis.json") << R"({"settings": {"model": "m", "task": "sst2"}})";
  fs::create_directories(root / "run" / "state" / "points");  // a pruning run killed before its first curve
  CHECK_THROWS_WITH(hp::analysis::classify_folders({(root / "missing").string()}),
                    Catch::Contains("missing: no such folder"));
  CHECK_THROWS_WITH(hp::analysis::classify_folders({(root / "empty").string()}),
                    Catch::Contains("holds no headprune output"));
  CHECK_THROWS_WITH(hp::analysis::classify_folders({(root / "analysis").string(), (root / "analysis").string()}),
                    Catch::Contains("are both analyses"));
  const auto f = hp::analysis::classify_folders({(root / "run").string(), (root / "analysis").string()});
  CHECK(f.pruning == (root / "run").string());
  CHECK(f.analysis == (root / "analysis").string());
  CHECK(f.task == "sst2");
  CHECK(f.analysed_model == "m");
  const auto panels = hp::analysis::static_panels(f, {});
  REQUIRE(panels.size() == 6);
  CHECK(panels[1].id == "curves");
  CHECK_THAT(panels[1].html, Catch::Contains("class=\"note\"") && Catch::Contains("has no curves"));
  CHECK_THAT(panels[3].html, Catch::Contains("no role_map.svg"));
}

TEST_CASE("report figures: ids inside an SVG are scoped to the figure", "[report]") {
  const std::string svg =
      R"svg(<svg><marker id="arrow"/><path marker-end="url(#arrow)"/><use href="#arrow"/></svg>)svg";
  const std::string fig = hp::analysis::figure("tree-3", svg, "a < b");
  CHECK_THAT(fig, Catch::Contains("id=\"arrow-tree-3\"") && Catch::Contains("url(#arrow-tree-3)") &&
                      Catch::Contains("href=\"#arrow-tree-3\"") && Catch::Contains("id=\"fig-tree-3\"") &&
                      Catch::Contains("a &lt; b"));
}
