// core/glue: the task table, the TSV reader on the real GLUE files in ../shared/data (row counts from
// its README, class counts derived independently with awk), format quirks on files written here, and
// the bad-input catalogue in tests/data/bad/.
#include "core/data/glue.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>
#include <vector>
#include <unistd.h>  // getpid

#include "core/io/checkpoint.h"
#include "core/data/task_options.h"
#include "core/base/errors.h"  // ConfigError, InputError
#include "fixtures.h"

using Catch::Matchers::Contains;
using hp::core::Example;
using hp::core::find_task;
using hp::core::read_task;
using hp::core::TaskSpec;

namespace {
namespace fs = std::filesystem;

using hp::test::kBadDataDir;
using hp::test::kSharedData;

// Class index -> count over the labelled rows.
std::map<int, int> class_counts(const std::vector<Example>& rows) {
  std::map<int, int> c;
  for (const auto& r : rows) c[static_cast<int>(r.label)]++;
  return c;
}

// `base` with its splits replaced by one file read from `root` (folder ".").
TaskSpec with_file(const std::string& base, const std::string& file, bool header) {
  TaskSpec t = find_task(base);
  t.folder = ".";
  t.splits = {{"dev", file, header}};
  return t;
}

// A fresh empty folder under the system temp dir, removed on destruction.
struct TempDir {
  fs::path path;
  TempDir() {
    path = hp::test::scratch_dir("hp_glue_test_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path / name, std::ios::binary) << bytes;
  }
};
}  // namespace

TEST_CASE("task table: GLUE label orders, metrics and unknown names", "[core]") {
  // HF transformers glue processors' get_labels(); classifier index i means labels[i].
  CHECK(find_task("mnli").labels == std::vector<std::string>{"contradiction", "entailment", "neutral"});
  CHECK(find_task("mnli_subset").labels == find_task("mnli").labels);
  CHECK(find_task("rte").labels == std::vector<std::string>{"entailment", "not_entailment"});
  CHECK(find_task("qnli").labels == std::vector<std::string>{"entailment", "not_entailment"});
  for (const char* name : {"sst2", "cola", "mrpc", "wnli", "qqp"})
    CHECK(find_task(name).labels == std::vector<std::string>{"0", "1"});
  CHECK(find_task("stsb").is_regression());
  CHECK(find_task("stsb").num_labels() == 1);
  CHECK(find_task("mnli").num_labels() == 3);
  CHECK(find_task("cola").metrics == std::vector<std::string>{"mcc"});
  CHECK(find_task("mrpc").metrics == std::vector<std::string>{"f1", "accuracy"});
  CHECK(find_task("stsb").metrics == std::vector<std::string>{"pearson", "spearman"});
  CHECK(find_task("mnli").find_split("dev").file == "dev_matched.tsv");
  REQUIRE_THROWS_AS(find_task("sst-2"), hp::ConfigError);
  REQUIRE_THROWS_WITH(find_task("sst-2"), Contains("unknown task 'sst-2'") && Contains("sst2, cola"));
  REQUIRE_THROWS_WITH(find_task("qnli").find_split("valid"),
                      Contains("unknown split 'valid'") && Contains("train, dev, test"));
}

TEST_CASE("real GLUE splits have the README's row counts", "[core][data]") {
  struct Row {
    const char* task;
    const char* split;
    size_t rows;
    bool labelled;
  };
  // Counts from ../shared/data/README.md.
  const Row kRows[] = {
      {"sst2", "train", 67349, true},
      {"sst2", "dev", 872, true},
      {"sst2", "test", 1821, false},
      {"cola", "train", 8551, true},
      {"cola", "dev", 1043, true},
      {"cola", "test", 1063, false},
      {"mrpc", "train", 3668, true},
      {"mrpc", "dev", 408, true},
      {"mrpc", "test", 1725, false},
      {"rte", "train", 2490, true},
      {"rte", "dev", 277, true},
      {"rte", "test", 3000, false},
      {"stsb", "train", 5749, true},
      {"stsb", "dev", 1500, true},
      {"stsb", "test", 1379, false},
      {"wnli", "train", 635, true},
      {"wnli", "dev", 71, true},
      {"wnli", "test", 146, false},
      {"qnli", "dev", 5463, true},
      {"qnli", "test", 5463, false},
      {"mnli_subset", "matched", 1000, true},
      {"mnli_subset", "mismatched", 1000, true},
      {"mnli_subset", "mismatched_numeric", 1000, true},
  };
  for (const Row& r : kRows) {
    INFO(r.task << " " << r.split);
    auto rows = read_task(find_task(r.task), kSharedData, r.split);
    CHECK(rows.size() == r.rows);
    size_t labelled = 0;
    for (const auto& e : rows) labelled += e.has_label;
    CHECK(labelled == (r.labelled ? r.rows : 0));
    CHECK(!rows.front().text_a.empty());
    if (!find_task(r.task).columns.text_b_name.empty() || find_task(r.task).columns.text_b_index >= 0)
      CHECK(!rows.front().text_b.empty());
  }
}

TEST_CASE("real GLUE dev splits have the awk-derived class counts", "[core][data]") {
  // awk -F'\t' 'NR>1{c[$2]++} END{for(k in c) print k, c[k]}' glue/SST-2/dev.tsv and likewise.
  CHECK(class_counts(read_task(find_task("sst2"), kSharedData, "dev")) == std::map<int, int>{{0, 428}, {1, 444}});
  CHECK(class_counts(read_task(find_task("sst2"), kSharedData, "train")) == std::map<int, int>{{0, 29780}, {1, 37569}});
  CHECK(class_counts(read_task(find_task("cola"), kSharedData, "dev")) == std::map<int, int>{{0, 322}, {1, 721}});
  CHECK(class_counts(read_task(find_task("mrpc"), kSharedData, "dev")) == std::map<int, int>{{0, 129}, {1, 279}});
  // entailment = 0, not_entailment = 1.
  CHECK(class_counts(read_task(find_task("rte"), kSharedData, "dev")) == std::map<int, int>{{0, 146}, {1, 131}});
  CHECK(class_counts(read_task(find_task("qnli"), kSharedData, "dev")) == std::map<int, int>{{0, 2702}, {1, 2761}});
  CHECK(class_counts(read_task(find_task("wnli"), kSharedData, "dev")) == std::map<int, int>{{0, 40}, {1, 31}});
  // contradiction = 0, entailment = 1, neutral = 2 (GLUE order, not the file's codes).
  CHECK(class_counts(read_task(find_task("mnli_subset"), kSharedData, "matched")) ==
        std::map<int, int>{{0, 316}, {1, 373}, {2, 311}});
  auto named = read_task(find_task("mnli_subset"), kSharedData, "mismatched");
  CHECK(class_counts(named) == std::map<int, int>{{0, 335}, {1, 346}, {2, 319}});
  // mnli.tsv is mismatched with codes 0 entailment, 1 neutral, 2 contradiction (paste|uniq -c
  // pairs them one to one); mapped by name, every row must agree with the named file.
  auto coded = read_task(find_task("mnli_subset"), kSharedData, "mismatched_numeric");
  REQUIRE(coded.size() == named.size());
  size_t agree = 0;
  for (size_t i = 0; i < coded.size(); ++i)
    agree += coded[i].label == named[i].label && coded[i].text_b == named[i].text_b;
  CHECK(agree == coded.size());
  // STS-B dev scores: awk 'NR>1{s+=$10} END{printf "%.6f", s}' = 3545.861333.
  double sum = 0;
  for (const auto& e : read_task(find_task("stsb"), kSharedData, "dev")) sum += e.label;
  CHECK(sum == Approx(3545.861333).margin(1e-3));  // float scores summed in double
}

TEST_CASE("real GLUE quirks: BOM, trailing space, no final newline", "[core][data]") {
  // MRPC dev row 1 (line 2 after the BOM'd header): label 1, "#1 String" = "He said the ...".
  auto mrpc = read_task(find_task("mrpc"), kSharedData, "dev");
  CHECK(mrpc[0].line == 2);
  CHECK(mrpc[0].label == 1.0f);
  CHECK(mrpc[0].text_a.rfind("He said the foodservice pie business", 0) == 0);
  CHECK(mrpc[0].text_b.rfind("\" The foodservice pie business", 0) == 0);
  // SST-2 keeps the space before the tab.
  auto sst = read_task(find_task("sst2"), kSharedData, "dev");
  CHECK(sst[0].text_a == "it 's a charming and often affecting journey . ");
  CHECK(sst[0].text_b.empty());
  // CoLA dev ends without a newline: its last row is still read.
  auto cola = read_task(find_task("cola"), kSharedData, "dev");
  CHECK(cola.back().text_a == "John talked to Bill about himself.");
  CHECK(cola.back().line == 1043);
  // STS-B dev row 1: score 5.000; last row: 0.
  auto stsb = read_task(find_task("stsb"), kSharedData, "dev");
  CHECK(stsb.front().label == 5.0f);
  CHECK(stsb.back().text_a == "New video shows US police officers beating mentally-ill man");
}

TEST_CASE("reader handles CRLF, BOM, quotes and trailing empty lines", "[core]") {
  TempDir dir;
  dir.write("q.tsv",
            "\xEF\xBB\xBFindex\tquestion\tsentence\tlabel\r\n"
            "0\tWhy \"so?\tBecause \"it\" is.\tentailment\r\n"
            "1\tA\t\"B\tnot_entailment\r\n\r\n\n");
  auto rows = read_task(with_file("qnli", "q.tsv", true), dir.path.string(), "dev");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].text_a == "Why \"so?");
  CHECK(rows[0].text_b == "Because \"it\" is.");
  CHECK(rows[0].label == 0.0f);
  CHECK(rows[1].text_b == "\"B");
  CHECK(rows[1].label == 1.0f);
  CHECK(rows[1].line == 3);

  // Full GLUE MNLI layout: 15 columns, text in sentence1/sentence2, label in the last (gold_label).
  dir.write("m.tsv",
            "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
            "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\t"
            "gold_label\n"
            "0\t1\t1e\tgov\t(\t(\t(\t(\tP .\tH .\tneutral\tneutral\tneutral\tneutral\tcontradiction\n");
  auto m = read_task(with_file("mnli", "m.tsv", true), dir.path.string(), "dev");
  REQUIRE(m.size() == 1);
  CHECK(m[0].text_a == "P .");
  CHECK(m[0].text_b == "H .");
  CHECK(m[0].label == 0.0f);  // contradiction is GLUE class 0
}

TEST_CASE("bad inputs name the file and line", "[core]") {
  auto bad = [](const char* task, const char* file, bool header) {
    return read_task(with_file(task, file, header), kBadDataDir, "dev");
  };
  REQUIRE_THROWS_AS(bad("sst2", "sst2_wrong_columns.tsv", true), hp::InputError);
  REQUIRE_THROWS_WITH(bad("sst2", "sst2_wrong_columns.tsv", true),
                      Contains("sst2_wrong_columns.tsv:4: expected 2 tab-separated columns (sentence, label), got 3"));
  REQUIRE_THROWS_WITH(bad("sst2", "sst2_unknown_label.tsv", true),
                      Contains("sst2_unknown_label.tsv:3: label '2' is not one of {0, 1}"));
  REQUIRE_THROWS_WITH(bad("stsb", "stsb_bad_score.tsv", true),
                      Contains("stsb_bad_score.tsv:3: score 'n/a' is not a number"));
  REQUIRE_THROWS_WITH(bad("cola", "cola_wrong_columns.tsv", false),
                      Contains("cola_wrong_columns.tsv:2: expected 4 tab-separated columns") &&
                          Contains("got 3; fix the file or pass the right --task"));
  REQUIRE_THROWS_WITH(bad("mnli_subset", "mnli_subset_unknown_label.tsv", false),
                      Contains("mnli_subset_unknown_label.tsv:2: label 'neutrall'"));
  REQUIRE_THROWS_WITH(bad("rte", "rte_missing_column.tsv", true),
                      Contains("rte_missing_column.tsv:1: header") && Contains("'sentence2'"));
  REQUIRE_THROWS_WITH(read_task(find_task("qnli"), kBadDataDir, "dev"),
                      Contains("glue/QNLI/dev.tsv: file not found") && Contains("HEADPRUNE_DATA"));
}

TEST_CASE("resolve_data_root: flag, environment, then ../shared/data", "[core][data]") {
  const char* old = std::getenv("HEADPRUNE_DATA");
  const std::string saved = old ? old : "";
  CHECK(hp::core::resolve_data_root(kSharedData) == kSharedData);
  REQUIRE_THROWS_WITH(hp::core::resolve_data_root(kBadDataDir), Contains("--data-root") && Contains("HEADPRUNE_DATA"));
  setenv("HEADPRUNE_DATA", kBadDataDir.c_str(), 1);
  REQUIRE_THROWS_WITH(hp::core::resolve_data_root(""), Contains("HEADPRUNE_DATA=" + kBadDataDir));
  setenv("HEADPRUNE_DATA", kSharedData.c_str(), 1);
  CHECK(hp::core::resolve_data_root("") == kSharedData);
  unsetenv("HEADPRUNE_DATA");
  // Found by walking up from the working directory or the test executable.
  CHECK(fs::equivalent(hp::core::resolve_data_root(""), kSharedData));
  if (old) setenv("HEADPRUNE_DATA", saved.c_str(), 1);
}

TEST_CASE("label names: GLUE's class names for tasks whose files use 0/1, written as id2label", "[glue][labels]") {
  const auto& sst2 = hp::core::find_task("sst2");
  CHECK(sst2.labels[1] == "1");  // what the file says
  CHECK(sst2.label_name(0) == "negative");
  CHECK(sst2.label_name(1) == "positive");
  CHECK(hp::core::find_task("cola").label_name(1) == "acceptable");
  CHECK(hp::core::find_task("mrpc").label_name(0) == "not_equivalent");
  CHECK(hp::core::find_task("rte").label_name(1) == "not_entailment");  // already names
  const auto opts = hp::core::task_load_options(sst2, 7);
  CHECK(opts.num_labels == 2);
  CHECK(opts.seed == 7);
  CHECK(opts.label_names == std::vector<std::string>{"negative", "positive"});
  CHECK(hp::core::task_load_options(hp::core::find_task("stsb"), 1).label_names.empty());
}

TEST_CASE("label names replace a checkpoint's generic LABEL_i and are saved; real names stay", "[glue][labels]") {
  const std::string tiny = hp::test::kTinyBert;  // id2label LABEL_0..2
  const auto& mnli = hp::core::find_task("mnli_subset");
  auto model = hp::core::load_bert(tiny, hp::core::task_load_options(mnli, 42));
  CHECK(model.config().id2label == std::vector<std::string>{"contradiction", "entailment", "neutral"});
  const auto dir = hp::test::scratch_dir("hp_label_names");
  std::filesystem::remove_all(dir);
  hp::core::save_bert(model, dir.string(), tiny);
  CHECK(hp::core::read_bert_config((dir / "config.json").string()).id2label == model.config().id2label);
  // A checkpoint that names its classes keeps its names, whatever the task calls them.
  hp::core::LoadOptions other = hp::core::task_load_options(mnli, 42);
  other.label_names = {"a", "b", "c"};
  CHECK(hp::core::load_bert(dir.string(), other).config().id2label[0] == "contradiction");
}

TEST_CASE("split slices: NAME[begin:end] reads those rows in file order, as Python slices them", "[glue][slice]") {
  using hp::core::parse_split_spec;
  using hp::core::slice_bounds;
  // Python's list slicing is the reference: l[-3:], l[:-3], l[2:5], l[-100:], l[5:2] on a list of 10.
  const std::vector<std::tuple<std::string, size_t, size_t>> cases = {
      {"train", 0, 10},  {"train[-3:]", 7, 10}, {"train[:-3]", 0, 7}, {"train[2:5]", 2, 5},
      {"train[-100:]", 0, 10}, {"train[5:2]", 5, 5}, {"train[:]", 0, 10}, {"train[3:-3]", 3, 7}};
  for (const auto& [spec, b, e] : cases) {
    INFO(spec);
    const auto s = parse_split_spec(spec);
    CHECK(s.name == "train");
    CHECK(slice_bounds(s, 10) == std::pair<size_t, size_t>{b, e});
    if (spec != "train[:]") CHECK(hp::core::format_split_spec(s) == spec);  // "[:]" formats as the bare name
  }
  for (const std::string bad : {"train[a:]", "train[1:2", "train[3]", "[1:2]", "train[1:2:3]", "train[--1:]", "train[1:2]x"})
    CHECK_THROWS_AS(parse_split_spec(bad, "prune.select_split"), hp::ConfigError);
  CHECK_THROWS_WITH(parse_split_spec("train[x:]", "prune.select_split"),
                    Contains("prune.select_split = 'train[x:]'") && Contains("train[:-1000]"));

  // On the real MRPC train split (3,668 rows): the two halves of a hold-out partition it, in file order.
  const auto& mrpc = find_task("mrpc");
  const auto all = read_task(mrpc, kSharedData, "train");
  const auto head = read_task(mrpc, kSharedData, "train[:-1000]");
  const auto tail = read_task(mrpc, kSharedData, "train[-1000:]");
  REQUIRE(all.size() == 3668);
  REQUIRE(head.size() == 2668);
  REQUIRE(tail.size() == 1000);
  CHECK(head.front().line == all.front().line);
  CHECK(head.back().line + 1 == tail.front().line);
  CHECK(tail.back().line == all.back().line);
  CHECK(tail.front().text_a == all[2668].text_a);
  CHECK_THROWS_WITH(read_task(mrpc, kSharedData, "train[4000:]"), Contains("holds no row of the 3668"));
  CHECK_THROWS_WITH(read_task(mrpc, kSharedData, "nosuch[1:]"), Contains("unknown split 'nosuch'"));
}
