// core/data/file_dataset: a user's CSV, TSV and JSON-lines files read on bytes written here, each expected table
// worked out by hand from RFC 4180 and the JSON text; the column choice against run_glue.py's rule; label kinds and
// orders against pandas' typing and Python's sorted(); every error's file:line. tests/core/file_dataset_reference.py
// compares the same reader with pandas itself.
#include "core/data/file_dataset.h"

#include <unistd.h>  // getpid

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/base/errors.h"  // ConfigError, InputError
#include "fixtures.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using hp::core::choose_columns;
using hp::core::FileColumns;
using hp::core::FileFormat;
using hp::core::FileLabels;
using hp::core::infer_labels;
using hp::core::LabelKind;
using hp::core::read_table;
using hp::core::TableFile;
using hp::core::to_examples;
using Rows = std::vector<std::vector<std::string>>;
using Names = std::vector<std::string>;

namespace {
namespace fs = std::filesystem;

// `bytes` written to this process's scratch folder; its path.
std::string write(const std::string& name, const std::string& bytes) {
  return hp::test::scratch_file("hp_file_dataset_test", name, bytes);
}

TableFile table(const std::string& name, const std::string& bytes, FileFormat f) {
  return read_table(write(name, bytes), f);
}

// A table by hand, rows on lines 2, 3, ...
TableFile hand_table(Names columns, Rows rows) {
  TableFile t;
  t.path = "train.csv";
  t.columns = std::move(columns);
  for (size_t i = 0; i < rows.size(); ++i) t.lines.push_back(static_cast<int>(i + 2));
  t.rows = std::move(rows);
  return t;
}

// A one-column label table ("text" first): the labels as training rows.
TableFile labels_table(const Names& labels) {
  Rows rows;
  for (const auto& l : labels) rows.push_back({"t", l});
  return hand_table({"text", "label"}, rows);
}

FileColumns columns_of(const Names& columns, const Names& text = {}, const std::string& label = "") {
  return choose_columns(hand_table(columns, {}), text, label);
}
}  // namespace

TEST_CASE("file_dataset: format from the setting or the extension", "[core][file_dataset]") {
  CHECK(hp::core::file_format("a/train.csv", "") == FileFormat::kCsv);
  CHECK(hp::core::file_format("a/dev.TSV", "") == FileFormat::kTsv);
  CHECK(hp::core::file_format("x.jsonl", "") == FileFormat::kJsonl);
  CHECK(hp::core::file_format("x.json", "") == FileFormat::kJsonl);
  CHECK(hp::core::file_format("x.txt", "tsv") == FileFormat::kTsv);
  CHECK(hp::core::file_format("x.csv", "json") == FileFormat::kJsonl);
  REQUIRE_THROWS_AS(hp::core::file_format("x.csv", "xml"), hp::ConfigError);
  REQUIRE_THROWS_WITH(hp::core::file_format("x.csv", "xml"), StartsWith("data.format = xml") && Contains("csv, tsv"));
  REQUIRE_THROWS_AS(hp::core::file_format("dir.v2/train", ""), hp::ConfigError);
  REQUIRE_THROWS_WITH(hp::core::file_format("data/train.txt", ""),
                      StartsWith("data/train.txt: ") && Contains("'.txt'") && Contains(".csv, .tsv, .jsonl or .json") &&
                          Contains("data.format"));
}

TEST_CASE("file_dataset: CSV fields holding commas, doubled quotes and line ends (RFC 4180)", "[core][file_dataset]") {
  const TableFile t = table("quoted.csv",
                            "text,label\n"
                            "\"a, b\",1\n"
                            "\"say \"\"hi\"\"\",0\n"
                            "\"two\nlines\",1\n"
                            "\n"
                            "plain,0\n"
                            ",1\n",
                            FileFormat::kCsv);
  CHECK(t.columns == Names{"text", "label"});
  CHECK(t.rows == Rows{{"a, b", "1"}, {"say \"hi\"", "0"}, {"two\nlines", "1"}, {"plain", "0"}, {"", "1"}});
  // The row of "two\nlines" spans lines 4-5; the empty line 6 holds no row.
  CHECK(t.lines == std::vector<int>{2, 3, 4, 7, 8});
}

TEST_CASE("file_dataset: a UTF-8 BOM, CRLF and text kept byte for byte", "[core][file_dataset]") {
  SECTION("BOM") {
    const TableFile t = table("bom.csv", "\xEF\xBB\xBFtext,label\nx,1\n", FileFormat::kCsv);
    CHECK(t.columns == Names{"text", "label"});
  }
  SECTION("CRLF: no CR left in a cell; a CRLF inside quotes is read as LF") {
    const TableFile t = table("crlf.csv", "text,label\r\nx,1\r\n\"a\r\nb\",0\r\ny,1", FileFormat::kCsv);
    CHECK(t.columns == Names{"text", "label"});
    CHECK(t.rows == Rows{{"x", "1"}, {"a\nb", "0"}, {"y", "1"}});
    CHECK(t.lines == std::vector<int>{2, 3, 5});
  }
  SECTION("spaces, tabs and non-ASCII text are not trimmed or changed") {
    const std::string text = "  caf\xC3\xA9 \xE2\x98\x95\t\xE6\x97\xA5\xE6\x9C\xAC ";  // "  café ☕\t日本 "
    const TableFile t = table("unicode.csv", "text,label\n" + text + ", 1 \n", FileFormat::kCsv);
    CHECK(t.rows == Rows{{text, " 1 "}});
  }
}

TEST_CASE("file_dataset: TSV splits on tabs only, quotes as in CSV", "[core][file_dataset]") {
  const TableFile t = table("dev.tsv",
                            "sentence\tlabel\n"
                            "hello, world\t1\n"
                            "\"a\ttab\"\t0\n",
                            FileFormat::kTsv);
  CHECK(t.columns == Names{"sentence", "label"});
  CHECK(t.rows == Rows{{"hello, world", "1"}, {"a\ttab", "0"}});
}

TEST_CASE("file_dataset: JSON lines: keys in first-seen order, numbers, bools, nulls", "[core][file_dataset]") {
  const TableFile t = table("train.jsonl",
                            "{\"text\": \"caf\\u00e9\", \"label\": 1}\n"
                            "\n"
                            "{\"label\": 0.5, \"text\": \"b\", \"extra\": true}\n"
                            "{\"text\": \"c\", \"label\": null, \"flag\": false}\n"
                            "{\"text\": \"d\", \"label\": 3.0, \"extra\": 18446744073709551615}\n"
                            "  {\"text\": \"e\", \"label\": -7, \"extra\": 1e-7}  \n",
                            FileFormat::kJsonl);
  CHECK(t.columns == Names{"text", "label", "extra", "flag"});
  CHECK(t.rows == Rows{{"caf\xC3\xA9", "1", "", ""},
                       {"b", "0.5", "true", ""},
                       {"c", "", "", "false"},
                       {"d", "3.0", "18446744073709551615", ""},
                       {"e", "-7", "1e-07", ""}});
  CHECK(t.lines == std::vector<int>{1, 3, 4, 5, 6});
}

TEST_CASE("file_dataset: columns chosen as run_glue.py chooses them", "[core][file_dataset]") {
  auto same = [](const FileColumns& c, const std::string& a, const std::string& b, const std::string& l) {
    CHECK(c.text_a == a);
    CHECK(c.text_b == b);
    CHECK(c.label == l);
  };
  same(columns_of({"idx", "sentence2", "label", "sentence1"}), "sentence1", "sentence2", "label");
  same(columns_of({"label", "review"}), "review", "", "label");
  same(columns_of({"premise", "label", "hypothesis", "idx"}), "premise", "hypothesis", "label");
  same(columns_of({"sentence1", "label"}), "sentence1", "", "label");  // sentence2 missing: the non-label rule
  same(columns_of({"premise", "hypothesis", "idx", "label"}, {"idx"}), "idx", "", "label");
  same(columns_of({"a", "b", "c"}, {"c", "a"}), "c", "a", "label");
  same(columns_of({"target", "q", "r"}, {}, "target"), "q", "r", "target");
  const TableFile t = hand_table({"premise", "hypothesis", "label"}, {});
  REQUIRE_THROWS_AS(choose_columns(t, {"nope"}, ""), hp::InputError);
  REQUIRE_THROWS_WITH(choose_columns(t, {"premise", "nope"}, ""),
                      StartsWith("train.csv: data.text_columns names 'nope'") &&
                          Contains("the columns are [premise, hypothesis, label]"));
  REQUIRE_THROWS_AS(choose_columns(t, {"premise", "hypothesis", "label"}, ""), hp::ConfigError);
  REQUIRE_THROWS_WITH(choose_columns(hand_table({"label"}, {}), {}, ""),
                      StartsWith("train.csv: no text column") && Contains("data.text_columns"));
}

TEST_CASE("file_dataset: label kinds and orders", "[core][file_dataset]") {
  SECTION("integers sort as numbers, 2 before 10; '+07' and '7' are one class") {
    const FileLabels l = infer_labels(labels_table({"10", "2", "-1", "+07", "7", "0"}), "", {});
    CHECK(l.kind == LabelKind::kClasses);
    CHECK(l.names == Names{"-1", "0", "2", "7", "10"});
  }
  SECTION("text sorts by bytes as Python sorts str (upper case, then lower, then non-ASCII)") {
    const FileLabels l = infer_labels(labels_table({"b", "\xC3\xA9", "B", "a", "b", "neutral"}), "", {});
    CHECK(l.kind == LabelKind::kClasses);
    CHECK(l.names == Names{"B", "a", "b", "neutral", "\xC3\xA9"});
  }
  SECTION("the model's id2label order wins when it holds every label") {
    CHECK(infer_labels(labels_table({"pos", "neg"}), "", {"pos", "neg", "neutral"}).names ==
          Names{"pos", "neg", "neutral"});
    CHECK(infer_labels(labels_table({"0", "1"}), "", {"1", "0"}).names == Names{"1", "0"});
    // LABEL_0/LABEL_1 (an untrained head) do not name the labels: the sorted order stays.
    CHECK(infer_labels(labels_table({"1", "0"}), "", {"LABEL_0", "LABEL_1"}).names == Names{"0", "1"});
    CHECK(infer_labels(labels_table({"pos", "neg", "neutral"}), "", {"pos", "neg"}).names ==
          Names{"neg", "neutral", "pos"});
  }
  SECTION("numbers with a fraction or exponent: regression, as pandas types the column float") {
    CHECK(infer_labels(labels_table({"0.5", "3", "4.25"}), "", {}).kind == LabelKind::kRegression);
    CHECK(infer_labels(labels_table({"1.0", "0.0"}), "", {}).kind == LabelKind::kRegression);
    CHECK(infer_labels(labels_table({"1", "2e1"}), "", {}).kind == LabelKind::kRegression);
    CHECK(infer_labels(labels_table({"1", "2", "1"}), "", {}).kind == LabelKind::kClasses);
  }
  SECTION("another label column") {
    const TableFile t = hand_table({"text", "y"}, {{"a", "x"}, {"b", "y"}});
    CHECK(infer_labels(t, "y", {}).names == Names{"x", "y"});
  }
}

TEST_CASE("file_dataset: Examples: classes, scores, unlabelled files", "[core][file_dataset]") {
  const TableFile train =
      table("train.csv", "sentence1,sentence2,label\np,h,neutral\nq,i,entailment\n", FileFormat::kCsv);
  const FileColumns c = choose_columns(train, {}, "");
  const FileLabels labels = infer_labels(train, "", {});
  const auto ex = to_examples(train, c, labels);
  REQUIRE(ex.size() == 2);
  CHECK((ex[0].text_a == "p" && ex[0].text_b == "h" && ex[0].label == 1 && ex[0].has_label && ex[0].line == 2));
  CHECK((ex[1].text_a == "q" && ex[1].text_b == "i" && ex[1].label == 0 && ex[1].line == 3));
  // A test file: no label column, or an empty one (as pandas writes NaN labels): unlabelled rows.
  for (const char* bytes : {"sentence1,sentence2\na,b\n", "sentence2,label,sentence1\nb,,a\n"}) {
    const auto test = to_examples(table("test.csv", bytes, FileFormat::kCsv), c, labels);
    REQUIRE(test.size() == 1);
    CHECK((test[0].text_a == "a" && test[0].text_b == "b" && !test[0].has_label));
  }
  const TableFile scores = table("stsb.csv", "text,label\na,0.5\nb,4\n", FileFormat::kCsv);
  const auto reg = to_examples(scores, choose_columns(scores, {}, ""), infer_labels(scores, "", {}));
  CHECK((reg[0].label == 0.5f && reg[1].label == 4.0f && reg[0].text_b.empty()));
}

TEST_CASE("file_dataset: every bad file is one error naming file:line", "[core][file_dataset]") {
  auto fails = [](const std::string& name, const std::string& bytes, FileFormat f, const std::string& message) {
    INFO(name);
    const std::string path = write(name, bytes);
    REQUIRE_THROWS_AS(read_table(path, f), hp::InputError);
    REQUIRE_THROWS_WITH(read_table(path, f), StartsWith(path + message));
  };
  fails("empty.csv", "", FileFormat::kCsv, ":1: empty file");
  fails("blank.jsonl", "\n  \n", FileFormat::kJsonl, ":1: no JSON objects");
  fails("header.csv", "text,label\n", FileFormat::kCsv, ":2: no rows after the header");
  fails("ragged.csv", "text,label\na,1\nb,c,1\n", FileFormat::kCsv, ":3: 3 fields, the header has 2; quote");
  fails("short.tsv", "text\tlabel\n\"x\ny\"\n", FileFormat::kTsv, ":2: 1 field, the header has 2");
  fails("stray.csv", "text,label\n5\" screen,1\n", FileFormat::kCsv, ":2: a '\"' inside a field");
  fails("unclosed.csv", "text,label\na,1\n\"open,1\nmore\n", FileFormat::kCsv, ":3: the quoted field");
  fails("dup.csv", "text,a,a\nx,1,2\n", FileFormat::kCsv, ":1: the column 'a' appears twice");
  fails("latin1.csv", "text,label\nca\xE9,1\n", FileFormat::kCsv, ":2: byte 3 is not UTF-8");
  fails("bad.jsonl", "{\"text\": \"a\"}\n{\"text\": \n", FileFormat::kJsonl, ":2: not valid JSON");
  fails("huge.jsonl", "{\"text\": \"a\", \"label\": 1e999}\n", FileFormat::kJsonl, ":1: a number out of range");
  fails("array.jsonl", "[1, 2]\n", FileFormat::kJsonl, ":1: a JSON array where an object was expected");
  fails("tokens.jsonl", "{\"text\": \"a\"}\n{\"tokens\": [\"a\"]}\n", FileFormat::kJsonl,
        ":2: the key 'tokens' holds a JSON array");

  const TableFile mixed = labels_table({"1", "0", "good", "1"});
  REQUIRE_THROWS_WITH(infer_labels(mixed, "", {}),
                      StartsWith("train.csv:4: label 'good' is text but earlier labels are numbers"));
  REQUIRE_THROWS_WITH(infer_labels(labels_table({"good", "bad", "2"}), "", {}),
                      StartsWith("train.csv:4: label '2' is a number but earlier labels are text"));
  REQUIRE_THROWS_WITH(infer_labels(labels_table({"1", ""}), "", {}), StartsWith("train.csv:3: the label is empty"));
  REQUIRE_THROWS_WITH(
      infer_labels(labels_table({"1"}), "target", {}),
      StartsWith("train.csv: data.label_column 'target' is not a column; the columns are [text, label]"));

  const TableFile train = labels_table({"a", "b"});
  const FileLabels labels = infer_labels(train, "", {});
  const FileColumns c = choose_columns(train, {}, "");
  REQUIRE_THROWS_WITH(to_examples(labels_table({"a", "c"}), c, labels),
                      StartsWith("train.csv:3: label 'c' is not among the training labels [a, b]"));
  REQUIRE_THROWS_WITH(to_examples(labels_table({"a", ""}), c, labels), StartsWith("train.csv:3: the label is empty"));
  REQUIRE_THROWS_WITH(to_examples(hand_table({"review", "label"}, {{"x", "a"}}), c, labels),
                      StartsWith("train.csv: the text column 'text'") && Contains("[review, label]"));
  const FileLabels scores{LabelKind::kRegression, {}};
  REQUIRE_THROWS_WITH(to_examples(labels_table({"0.5", "high"}), c, scores),
                      StartsWith("train.csv:3: label 'high' is not a number"));
}
