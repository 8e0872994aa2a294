// core/data/token_dataset: a tagger's CoNLL-U, CoNLL and JSON-lines files read on bytes written here, each expected
// sentence worked out by hand from the UD format, run_ner.py's CoNLL rule and the JSON text; the tag set against
// Python's sorted() and the model's id2label; is_bio by hand; every error's file:line. tests/core/token_reference.py
// compares the CoNLL-U reading with the `conllu` package on UD English EWT.
#include "core/data/token_dataset.h"

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
using hp::core::read_tagged;
using hp::core::tag_labels;
using hp::core::TaggedSentence;
using hp::core::TokenFormat;
using Names = std::vector<std::string>;

namespace {
namespace fs = std::filesystem;

// `bytes` written to this process's scratch folder; its path.
std::string write(const std::string& name, const std::string& bytes) {
  return hp::test::scratch_file("hp_token_dataset_test", name, bytes);
}

std::vector<TaggedSentence> tagged(const std::string& name, const std::string& bytes, TokenFormat f,
                                   const std::string& tag_column = "") {
  return read_tagged(write(name, bytes), f, tag_column);
}

// The message read_tagged throws for `bytes`, with the scratch folder cut off: "name:line: ...".
template <class E = hp::InputError>
std::string error_of(const std::string& name, const std::string& bytes, TokenFormat f, const std::string& col = "") {
  const std::string path = write(name, bytes);
  try {
    read_tagged(path, f, col);
  } catch (const E& e) {
    const std::string m = e.what();
    CHECK(m.find('\n') == std::string::npos);
    return m.rfind(path, 0) == 0 ? name + m.substr(path.size()) : m;
  }
  FAIL("no error for " << name);
  return "";
}

std::vector<TaggedSentence> sentences(const std::vector<std::pair<Names, Names>>& words_tags) {
  std::vector<TaggedSentence> out;
  for (const auto& [w, t] : words_tags) out.push_back({w, t, 1});
  return out;
}

// A CoNLL-U sentence with a multiword range (2-3) and an empty node (4.1), comments and a sent_id.
const std::string kConllu =
    "# newdoc id = d1\n"
    "# sent_id = s1\n"
    "# text = I don't know.\n"
    "1\tI\tI\tPRON\tPRP\t_\t4\tnsubj\t_\t_\n"
    "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_\n"
    "3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_\n"
    "4\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_\n"
    "4.1\tknows\tknow\tVERB\tVBZ\t_\t_\t_\t4:conj\t_\n"
    "5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_\n"
    "\n"
    " \t \n"  // a line of spaces and tabs ends nothing more: no empty sentence
    "# sent_id = s2\n"
    "1\tHi\thi\tINTJ\t_\t_\t0\troot\t_\t_\n";
}  // namespace

TEST_CASE("token_dataset: format from the setting or the extension", "[core][token_dataset]") {
  CHECK(hp::core::token_format("a/en_ewt-ud-dev.conllu", "") == TokenFormat::kConllu);
  CHECK(hp::core::token_format("a/train.CoNLL", "") == TokenFormat::kConll);
  for (const char* name : {"x.txt", "x.iob", "x.bio"}) CHECK(hp::core::token_format(name, "") == TokenFormat::kConll);
  CHECK(hp::core::token_format("x.jsonl", "") == TokenFormat::kJsonl);
  CHECK(hp::core::token_format("x.json", "") == TokenFormat::kJsonl);
  CHECK(hp::core::token_format("x.txt", "conllu") == TokenFormat::kConllu);
  CHECK(hp::core::token_format("x.conllu", "jsonl") == TokenFormat::kJsonl);
  CHECK(hp::core::token_format("x.json", "conll") == TokenFormat::kConll);
  REQUIRE_THROWS_AS(hp::core::token_format("x.conll", "csv"), hp::ConfigError);
  REQUIRE_THROWS_WITH(hp::core::token_format("x.conll", "csv"),
                      StartsWith("data.format = csv, ") && Contains("conllu, conll or jsonl"));
  REQUIRE_THROWS_AS(hp::core::token_format("dir.v2/train", ""), hp::ConfigError);
  REQUIRE_THROWS_WITH(hp::core::token_format("data/train.csv", ""),
                      StartsWith("data/train.csv: ") && Contains("'.csv'") && Contains("data.format"));
}

TEST_CASE("token_dataset: CoNLL-U words skip ranges and empty nodes; upos, xpos, deprel", "[core][token_dataset]") {
  const Names words = {"I", "do", "n't", "know", "."};
  const auto upos = tagged("t.conllu", kConllu, TokenFormat::kConllu);
  REQUIRE(upos.size() == 2);
  CHECK(upos[0].words == words);
  CHECK(upos[0].tags == Names{"PRON", "AUX", "PART", "VERB", "PUNCT"});
  CHECK(upos[0].line == 4);  // the first token line, after the comments
  CHECK(upos[1].words == Names{"Hi"});
  CHECK(upos[1].tags == Names{"INTJ"});
  CHECK(upos[1].line == 14);
  CHECK(tagged("t.conllu", kConllu, TokenFormat::kConllu, "upos")[0].tags == upos[0].tags);
  const auto xpos = tagged("t.conllu", kConllu, TokenFormat::kConllu, "xpos");
  CHECK(xpos[0].words == words);
  CHECK(xpos[0].tags == Names{"PRP", "VBP", "RB", "VB", "."});
  CHECK(xpos[1].tags == Names{"_"});  // an unspecified XPOS stays "_"
  const auto deprel = tagged("t.conllu", kConllu, TokenFormat::kConllu, "deprel");
  CHECK(deprel[0].tags == Names{"nsubj", "aux", "advmod", "root", "punct"});
  REQUIRE_THROWS_AS(tagged("t.conllu", kConllu, TokenFormat::kConllu, "feats"), hp::ConfigError);
  REQUIRE_THROWS_WITH(tagged("t.conllu", kConllu, TokenFormat::kConllu, "feats"),
                      StartsWith("data.tag_column = feats, ") && Contains("upos, xpos and deprel"));
}

TEST_CASE("token_dataset: CoNLL columns, -DOCSTART-, blank lines, BOM and CRLF", "[core][token_dataset]") {
  const auto s = tagged("train.conll",
                        "\xEF\xBB\xBF-DOCSTART- -X- -X- O\r\n"
                        "\r\n"
                        "EU NNP B-NP B-ORG\r\n"
                        "rejects\tVBZ\tB-VP\tO\r\n"
                        "German  JJ B-NP   B-MISC  \r\n"
                        "\r\n"
                        "\r\n"
                        "  \t\r\n"
                        "Peter B-PER\r\n"
                        "-DOCSTART- -X- O O\r\n"
                        "caf\xC3\xA9 O\r\n"
                        "\r\n",
                        TokenFormat::kConll);
  REQUIRE(s.size() == 3);
  CHECK(s[0].words == Names{"EU", "rejects", "German"});
  CHECK(s[0].tags == Names{"B-ORG", "O", "B-MISC"});  // the last column is the tag
  CHECK(s[0].line == 3);
  CHECK(s[1].words == Names{"Peter"});  // a -DOCSTART- line ends a sentence as a blank line does
  CHECK(s[1].tags == Names{"B-PER"});
  CHECK(s[1].line == 9);
  CHECK(s[2].words == Names{"caf\xC3\xA9"});
  CHECK(s[2].line == 11);
  REQUIRE_THROWS_WITH(tagged("t.conll", "a O\n", TokenFormat::kConll, "upos"),
                      StartsWith("data.tag_column = upos, ") && Contains("last column"));
}

TEST_CASE("token_dataset: JSON lines with ner_tags or tags, strings or integers", "[core][token_dataset]") {
  const auto s = tagged("train.jsonl",
                        "{\"id\": \"0\", \"tokens\": [\"EU\", \"rejects\", \"caf\\u00e9\"], \"ner_tags\": [3, 0, 0]}\n"
                        "\n"
                        "{\"tokens\": [\"Peter\", \"Blackburn\"], \"tags\": [\"B-PER\", \"I-PER\"]}\n"
                        "  {\"tokens\": [], \"ner_tags\": []}  \n"
                        "{\"tokens\": [\"x\", \"y\"], \"ner_tags\": [-7, 18446744073709551615]}\n",
                        TokenFormat::kJsonl);
  REQUIRE(s.size() == 4);
  CHECK(s[0].words == Names{"EU", "rejects", "caf\xC3\xA9"});
  CHECK(s[0].tags == Names{"3", "0", "0"});
  CHECK(s[0].line == 1);
  CHECK(s[1].tags == Names{"B-PER", "I-PER"});
  CHECK(s[1].line == 3);
  CHECK(s[2].words.empty());  // an empty sentence is kept, as run_ner.py keeps it
  CHECK(s[2].line == 4);
  CHECK(s[3].tags == Names{"-7", "18446744073709551615"});
  // ner_tags is preferred to tags; data.tag_column names another key.
  const std::string both = "{\"tokens\": [\"a\"], \"tags\": [\"T\"], \"ner_tags\": [\"N\"], \"pos_tags\": [\"DT\"]}\n";
  CHECK(tagged("both.jsonl", both, TokenFormat::kJsonl)[0].tags == Names{"N"});
  CHECK(tagged("both.jsonl", both, TokenFormat::kJsonl, "pos_tags")[0].tags == Names{"DT"});
}

TEST_CASE("token_dataset: every error names file:line and a fix", "[core][token_dataset]") {
  using F = TokenFormat;
  SECTION("JSON lines") {
    CHECK(error_of("n.jsonl", "{\"tokens\": [\"a\"], \"tags\": [\"O\"]}\n{\"tokens\": [\"a\", \"b\", \"c\"], "
                              "\"ner_tags\": [\"O\", \"O\"]}\n",
                   F::kJsonl) == "n.jsonl:2: 3 tokens but 2 ner_tags; give every token exactly one tag");
    CHECK_THAT(error_of("j.jsonl", "\n{\"tokens\": [\"a\"],\n", F::kJsonl),
               StartsWith("j.jsonl:2: not valid JSON (byte ") && Contains("; write one JSON object per line"));
    CHECK_THAT(error_of("k.jsonl", "{\"words\": [\"a\"], \"ner_tags\": [\"O\"]}\n", F::kJsonl),
               StartsWith("k.jsonl:1: no 'tokens' key; write {\"tokens\": [\"word\", ...], \"ner_tags\""));
    CHECK_THAT(error_of("t.jsonl", "{\"tokens\": [\"a\"]}\n", F::kJsonl),
               StartsWith("t.jsonl:1: no 'ner_tags' or 'tags' key; "));
    CHECK_THAT(error_of("p.jsonl", "{\"tokens\": [\"a\"], \"ner_tags\": [\"O\"]}\n", F::kJsonl, "pos_tags"),
               StartsWith("p.jsonl:1: no 'pos_tags' key; ") && Contains("data.tag_column"));
    CHECK_THAT(error_of("a.jsonl", "[\"a\"]\n", F::kJsonl),
               StartsWith("a.jsonl:1: a JSON array where an object was expected; "));
    CHECK_THAT(error_of("s.jsonl", "{\"tokens\": \"a b\", \"ner_tags\": [\"O\"]}\n", F::kJsonl),
               StartsWith("s.jsonl:1: 'tokens' is a JSON string; write it as an array"));
    CHECK_THAT(error_of("w.jsonl", "{\"tokens\": [\"a\", 5], \"ner_tags\": [\"O\", \"O\"]}\n", F::kJsonl),
               StartsWith("w.jsonl:1: token 2 is a JSON number; write each token as a string"));
    CHECK_THAT(error_of("f.jsonl", "{\"tokens\": [\"a\", \"b\"], \"ner_tags\": [1, 0.5]}\n", F::kJsonl),
               StartsWith("f.jsonl:1: tag 2 is a JSON number; write each tag as a string") && Contains("integer"));
    CHECK_THAT(error_of("e.jsonl", "", F::kJsonl), StartsWith("e.jsonl:1: empty file; "));
    CHECK_THAT(error_of("b.jsonl", "\n  \n\t\n", F::kJsonl),
               StartsWith("b.jsonl:3: no sentence in the file (only blank lines); "));
  }
  SECTION("CoNLL") {
    CHECK(error_of("c.conll", "EU B-ORG\n\nword\n", F::kConll) ==
          "c.conll:3: 1 column ('word'), expected the word and its tag; write \"word tag\" separated by a space or "
          "a tab, and a blank line between sentences");
    CHECK_THAT(error_of("e.conll", "", F::kConll), StartsWith("e.conll:1: empty file; "));
    CHECK_THAT(error_of("d.conll", "-DOCSTART- -X- O\n\n-DOCSTART- -X- O\n", F::kConll),
               StartsWith("d.conll:3: no sentence in the file (only blank and -DOCSTART- lines); "));
  }
  SECTION("CoNLL-U") {
    CHECK(error_of("u.conllu", "# sent_id = 1\n1\tI\tI\tPRON\tPRP\t_\t0\troot\t_\n", F::kConllu) ==
          "u.conllu:2: found 9 TAB-separated fields, expected 10 (field 10 MISC missing); separate ID FORM LEMMA UPOS "
          "XPOS FEATS HEAD DEPREL DEPS MISC by one TAB, _ if empty");
    CHECK_THAT(error_of("w.conllu", "1 I I PRON PRP _ 0 root _ _\n", F::kConllu),
               StartsWith("w.conllu:1: found 1 TAB-separated fields, expected 10"));
    CHECK_THAT(error_of("e.conllu", "", F::kConllu), StartsWith("e.conllu:1: no sentence in the file"));
  }
  SECTION("bytes that are not UTF-8, in every format") {
    CHECK(error_of("x.conll", "a O\nb\xFF O\n", F::kConll) == "x.conll:2: byte 2 is not UTF-8; re-save the file as UTF-8");
    CHECK(error_of("x.jsonl", "{\"tokens\": [\"\xC3\"]}\n", F::kJsonl) ==
          "x.jsonl:1: byte 14 is not UTF-8; re-save the file as UTF-8");
    CHECK(error_of("x.conllu", "\n\n\xE2\x82\n", F::kConllu) ==
          "x.conllu:3: byte 1 is not UTF-8; re-save the file as UTF-8");
  }
  SECTION("a missing file") {
    REQUIRE_THROWS_WITH(read_tagged(write("here.conll", "a O\n") + ".gone", F::kConll, ""),
                        Contains("here.conll.gone: cannot open the file"));
  }
}

TEST_CASE("token_dataset: tag_labels sorts as Python does, or keeps the model's id2label", "[core][token_dataset]") {
  // sorted() on str: bytes, so upper case before lower case and "I-" after "B-".
  const auto text = sentences({{{"a", "b", "c"}, {"O", "I-PER", "B-PER"}}, {{"d", "e"}, {"b-x", "B-LOC"}}});
  CHECK(tag_labels(text, {}) == Names{"B-LOC", "B-PER", "I-PER", "O", "b-x"});
  // Integer tags (JSON lines ner_tags) sort as Python's ints: 2 < 10, negative first.
  const auto ints = sentences({{{"a", "b", "c"}, {"10", "2", "0"}}, {{"d", "e"}, {"-1", "2"}}});
  CHECK(tag_labels(ints, {}) == Names{"-1", "0", "2", "10"});
  // One text tag among them: all sorted as text. "007" is text, not the integer 7.
  CHECK(tag_labels(sentences({{{"a", "b", "c"}, {"10", "2", "007"}}}), {}) == Names{"007", "10", "2"});
  // id2label holding every tag: its order, extra labels included; missing one: sorted.
  const Names id2label = {"O", "B-PER", "I-PER", "B-LOC", "I-LOC", "b-x"};
  CHECK(tag_labels(text, id2label) == id2label);
  CHECK(tag_labels(text, {"O", "B-PER", "I-PER", "B-LOC"}) == Names{"B-LOC", "B-PER", "I-PER", "O", "b-x"});
}

TEST_CASE("token_dataset: is_bio accepts O, B- and I- tag sets only", "[core][token_dataset]") {
  CHECK(hp::core::is_bio({"B-LOC", "B-PER", "I-PER", "O"}));
  CHECK(hp::core::is_bio({"B-MISC", "I-MISC"}));
  CHECK_FALSE(hp::core::is_bio({"O"}));  // no entity to score
  CHECK_FALSE(hp::core::is_bio({}));
  CHECK_FALSE(hp::core::is_bio({"NOUN", "VERB", "O"}));
  CHECK_FALSE(hp::core::is_bio({"O", "B-PER", "E-PER"}));  // IOBES
  CHECK_FALSE(hp::core::is_bio({"O", "S-PER"}));
  CHECK_FALSE(hp::core::is_bio({"O", "b-per"}));
}
