// core/data/conllu against hand-written fixtures (tests/data/analysis/conllu_*.conllu), the
// bad-input catalogue, and the real UD English EWT dev file, counted by an independent line scan.
// tests/core/token_reference.py compares the same reader with the `conllu` package.
#include "core/data/conllu.h"

#include <catch2/catch.hpp>
#include <fstream>

#include "core/base/errors.h"  // InputError
#include "fixtures.h"
#include "skip.h"

using Catch::Matchers::Contains;
using hp::core::ConlluSentence;
using hp::core::read_conllu;

namespace {
using hp::test::kAnalysisDataDir;
const std::string kEwtDev = hp::test::kSharedData + "/ud_english_ewt/en_ewt-ud-dev.conllu";

// The fixture's three sentences, written out by hand from conllu_good.conllu.
void check_good(const std::vector<ConlluSentence>& s) {
  REQUIRE(s.size() == 3);
  // Range 2-3 "don't" is skipped, its words do and n't are kept; a FORM may hold a space ("10
  // 000").
  CHECK(s[0].words == std::vector<std::string>{"I", "do", "n't", "know", "the", "10 000", "answers", "."});
  CHECK(s[0].heads == std::vector<int>{4, 4, 4, 0, 7, 7, 4, 4});
  CHECK(s[0].deprels == std::vector<std::string>{"nsubj", "aux", "advmod", "root", "det", "nummod", "obj", "punct"});
  CHECK(s[0].upos == std::vector<std::string>{"PRON", "AUX", "PART", "VERB", "DET", "NUM", "NOUN", "PUNCT"});
  CHECK(s[0].xpos == std::vector<std::string>{"PRP", "VBP", "RB", "VB", "DT", "CD", "NNS", "."});
  CHECK(s[0].sent_id == "s1");
  CHECK(s[0].line == 4);
  // Empty node 6.1 is skipped; the subtype stays in DEPREL.
  CHECK(s[1].words == std::vector<std::string>{"Mary", "'s", "cat", "sleeps", ",", "Bob", "too", "."});
  CHECK(s[1].heads == std::vector<int>{3, 1, 4, 0, 6, 4, 6, 4});
  CHECK(s[1].deprels.front() == "nmod:poss");
  CHECK(s[1].deprels[6] == "advmod");
  CHECK(s[1].upos[5] == "PROPN");
  CHECK(s[1].upos[6] == "ADV");  // word 7 "too", after the empty node
  CHECK(s[1].sent_id == "s2");
  CHECK(s[1].line == 16);
  // Two blank lines in a row do not make an empty sentence; no sent_id comment gives "".
  CHECK(s[2].words == std::vector<std::string>{"_"});
  CHECK(s[2].heads == std::vector<int>{0});
  CHECK(s[2].sent_id.empty());
  CHECK(s[2].line == 28);
}
}  // namespace

TEST_CASE("read_conllu keeps syntactic words, heads, deprels, sent_id and lines", "[core][conllu]") {
  check_good(read_conllu(kAnalysisDataDir + "conllu_good.conllu"));
}

TEST_CASE("read_conllu tolerates a BOM, CRLF and a missing final blank line", "[core][conllu]") {
  check_good(read_conllu(kAnalysisDataDir + "conllu_good_crlf_bom.conllu"));
}

TEST_CASE("read_conllu names file, line and field of bad input", "[core][conllu]") {
  using hp::InputError;
  const auto read = [](const std::string& name) { return read_conllu(kAnalysisDataDir + name); };
  REQUIRE_THROWS_AS(read("conllu_bad_columns.conllu"), InputError);
  REQUIRE_THROWS_WITH(read("conllu_bad_columns.conllu"),
                      Contains("conllu_bad_columns.conllu:7: found 9 TAB-separated fields, expected 10 "
                               "(field 10 MISC missing)"));
  REQUIRE_THROWS_WITH(read("conllu_bad_head_not_int.conllu"),
                      Contains("conllu_bad_head_not_int.conllu:6: HEAD 'two' of word 1 is not an integer "
                               "(field 7 HEAD)"));
  REQUIRE_THROWS_WITH(read("conllu_bad_head_range.conllu"),
                      Contains("conllu_bad_head_range.conllu:8: HEAD 4 of word 3 is outside 0..3"));
  REQUIRE_THROWS_WITH(read("conllu_bad_head_range.conllu"), Contains("(field 7 HEAD); "));
  REQUIRE_THROWS_WITH(read("conllu_bad_ids.conllu"),
                      Contains("conllu_bad_ids.conllu:7: ID 3 where 2 was expected (field 1 ID)"));
  REQUIRE_THROWS_WITH(read("conllu_bad_empty_form.conllu"),
                      Contains("conllu_bad_empty_form.conllu:7: empty FORM of word 2 (field 2 FORM)"));
  REQUIRE_THROWS_WITH(read("conllu_bad_no_sentences.conllu"),
                      Contains("conllu_bad_no_sentences.conllu:4: no sentence in the file"));
  REQUIRE_THROWS_AS(read("conllu_missing.conllu"), InputError);
  REQUIRE_THROWS_WITH(read("conllu_missing.conllu"), Contains("conllu_missing.conllu: cannot open"));
  REQUIRE_THROWS_WITH(read(""), Contains("analysis/: is a folder"));
  // Every message is one line with a fix after "; ".
  try {
    read("conllu_bad_ids.conllu");
    FAIL("no exception");
  } catch (const InputError& e) {
    const std::string m = e.what();
    CHECK(m.find('\n') == std::string::npos);
    CHECK(m.find("; number the words") != std::string::npos);
  }
}

TEST_CASE("read_conllu parses the UD English EWT dev file", "[core][conllu]") {
  std::ifstream raw(kEwtDev);
  if (!raw) return hp::test::skip("UD English EWT not found at " + kEwtDev + "; put ../shared beside the repository");
  // Independent count: "# sent_id" comment lines, and token lines whose ID is all digits.
  size_t sent_ids = 0, words = 0;
  for (std::string line; std::getline(raw, line);) {
    if (line.rfind("# sent_id", 0) == 0) ++sent_ids;
    const std::string id = line.substr(0, line.find('\t'));
    if (!id.empty() && id.find_first_not_of("0123456789") == std::string::npos) ++words;
  }
  const std::vector<ConlluSentence> s = read_conllu(kEwtDev);
  CHECK(s.size() > 1000);
  CHECK(s.size() == sent_ids);
  size_t parsed_words = 0;
  for (const ConlluSentence& d : s) {
    const int m = static_cast<int>(d.words.size());
    parsed_words += d.words.size();
    REQUIRE(d.heads.size() == d.words.size());
    REQUIRE(d.deprels.size() == d.words.size());
    REQUIRE((d.upos.size() == d.words.size() && d.xpos.size() == d.words.size()));
    CHECK(!d.sent_id.empty());
    for (int h : d.heads) REQUIRE((h >= 0 && h <= m));
  }
  CHECK(parsed_words == words);
}
