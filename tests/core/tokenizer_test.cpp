// WordPiece tokenizer: hand-computed cases on a tiny vocab, hand-checked cases on the real
// bert-base-uncased vocab, and id-for-id parity with HF BertTokenizerFast on all GLUE, MNLI
// subset and UD EWT text (reference from tools/tokenizer_reference.py).
#include "core/text/tokenizer.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/errors.h"  // InputError, ConfigError
#include "fixtures.h"
#include "skip.h"
#include "tokref.h"

using Catch::Matchers::Contains;
using hp::core::Encoding;
using hp::core::longest_first_lengths;
using hp::core::TokenizerOptions;
using hp::core::Tokenizer;
using Strings = std::vector<std::string>;

namespace {

using hp::test::kSharedVocab;

// Writes `lines` as a vocab file in the temp folder and returns its path.
std::string write_vocab(const std::string& name, const Strings& lines) {
  const std::string path = std::string(P_tmpdir) + "/hp_tokenizer_test_" + name + ".txt";
  std::ofstream out(path);
  for (const auto& l : lines) out << l << "\n";
  return path;
}

const Tokenizer& bert() {
  static const Tokenizer tok = Tokenizer::from_model_dir(kSharedVocab);
  return tok;
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

TEST_CASE("tiny vocab: greedy longest-match-first WordPiece", "[core][tokenizer]") {
  // ids: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 un=4 ##aff=5 ##able=6 a=7 ab=8 ##b=9 ##c=10 é=11 ##é=12 ##a=13
  const auto path = write_vocab("tiny", {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "a", "ab", "##b",
                                         "##c", "é", "##é", "##a"});
  TokenizerOptions plain;
  plain.lower_case = false;
  const auto tok = Tokenizer::from_files(path, plain);
  CHECK(tok.vocab_size() == 14);
  CHECK(tok.tokenize("unaffable") == Strings{"un", "##aff", "##able"});
  CHECK(tok.tokenize_ids("unaffable") == std::vector<int32_t>{4, 5, 6});
  // Longest first: "ab" + "##c", never "a" + "##b" + "##c".
  CHECK(tok.tokenize("abc") == Strings{"ab", "##c"});
  // One unmatched piece turns the whole word into [UNK]; other words are untouched.
  CHECK(tok.tokenize("unaffablex abc") == Strings{"[UNK]", "ab", "##c"});
  // 100 code points is the limit; 101 is [UNK]. Counted in code points, not bytes.
  CHECK(tok.tokenize(repeat("a", 100)).size() == 100);
  CHECK(tok.tokenize(repeat("a", 101)) == Strings{"[UNK]"});
  const auto e100 = tok.tokenize(repeat("é", 100));  // 200 bytes
  REQUIRE(e100.size() == 100);
  CHECK(e100[0] == "é");
  CHECK(e100[99] == "##é");
  CHECK(tok.tokenize(repeat("é", 101)) == Strings{"[UNK]"});
}

TEST_CASE("real vocab: normalization as HF BertNormalizer", "[core][tokenizer]") {
  const auto& tok = bert();
  CHECK(tok.options().lower_case);
  CHECK_FALSE(tok.options().strip_accents.has_value());  // null in tokenizer_config.json
  CHECK(tok.vocab_size() == 30522);
  CHECK(tok.pad_id() == 0);
  CHECK(tok.unk_id() == 100);
  CHECK(tok.cls_id() == 101);
  CHECK(tok.sep_id() == 102);
  CHECK(tok.mask_id() == 103);
  CHECK(tok.kind() == hp::core::TokenizerKind::kWordPiece);
  // Accents: strip_accents=null follows lower_case, so NFD then drop Mn.
  CHECK(tok.tokenize("Héllo") == Strings{"hello"});
  CHECK(tok.tokenize("NAÏVE Café") == Strings{"naive", "cafe"});
  // U+0130 lower-cases to i + U+0307, which accent stripping removes.
  CHECK(tok.tokenize("İstanbul") == Strings{"istanbul"});
  // CJK ideographs become single words; kana does not count as CJK.
  CHECK(tok.tokenize("中文abc") == Strings{"中", "文", "abc"});
  // Control (Cc) and format (Cf) chars, NUL and U+FFFD vanish; \t \n \r are whitespace.
  CHECK(tok.tokenize(std::string("h\x01"
                                 "e\xE2\x80\x8B"
                                 "l\xEF\xBF\xBD"
                                 "l") +
                     '\0' + "o") == Strings{"hello"});
  CHECK(tok.tokenize("hello\tworld\r\nagain") == Strings{"hello", "world", "again"});
  // U+00A0 and U+3000 are whitespace.
  CHECK(tok.tokenize("hello\xC2\xA0world\xE3\x80\x80!") == Strings{"hello", "world", "!"});
}

TEST_CASE("real vocab: punctuation, continuation and specials", "[core][tokenizer]") {
  const auto& tok = bert();
  CHECK(tok.tokenize("Hello, world!!") == Strings{"hello", ",", "world", "!", "!"});
  CHECK(tok.tokenize("don't") == Strings{"don", "'", "t"});
  // '$' is ASCII punctuation for BERT although Unicode calls it Sc; em dash is Pd.
  CHECK(tok.tokenize("$5") == Strings{"$", "5"});
  CHECK(tok.tokenize("a\xE2\x80\x94"
                     "b") == Strings{"a", "\xE2\x80\x94", "b"});
  // "##" continuation (the example in BERT's README).
  CHECK(tok.tokenize("unaffable") == Strings{"una", "##ffa", "##ble"});
  CHECK(tok.tokenize("playing") == Strings{"playing"});
  // Special tokens in raw text stay whole, even inside a word; lower-case ones do not.
  CHECK(tok.tokenize("x[SEP]y [UNK]") == Strings{"x", "[SEP]", "y", "[UNK]"});
  CHECK(tok.tokenize("[sep]") == Strings{"[", "sep", "]"});
  CHECK(tok.tokenize("").empty());
}

TEST_CASE("encode: specials, pair type ids, single truncation", "[core][tokenizer]") {
  const auto& tok = bert();
  const int32_t the = *tok.find("the");
  const int32_t cat = *tok.find("cat");
  const std::string b = "the cat";
  Encoding pair = tok.encode("the", &b, /*max_seq_len=*/0);
  CHECK(pair.ids == std::vector<int32_t>{101, the, 102, the, cat, 102});
  CHECK(pair.type_ids == std::vector<int32_t>{0, 0, 0, 1, 1, 1});
  Encoding single = tok.encode("the cat", nullptr, 0);
  CHECK(single.ids == std::vector<int32_t>{101, the, cat, 102});
  CHECK(single.type_ids == std::vector<int32_t>{0, 0, 0, 0});
  Encoding cut = tok.encode(repeat("the ", 10), nullptr, 5);
  CHECK(cut.ids == std::vector<int32_t>{101, the, the, the, 102});
  CHECK_THROWS_AS(tok.encode("a", &b, 2), hp::ConfigError);
  CHECK_THROWS_AS(tok.encode("a", nullptr, -1), hp::ConfigError);
}

TEST_CASE("longest_first truncation follows tokenizers' rule", "[core][tokenizer]") {
  // Hand-worked from tokenizers 0.19 truncate_encodings (checked against BertTokenizerFast).
  using P = std::pair<size_t, size_t>;
  CHECK(longest_first_lengths(5, 5, 20) == P{5, 5});  // fits
  CHECK(longest_first_lengths(3, 20, 10) == P{3, 7});  // only the longer one shrinks
  CHECK(longest_first_lengths(20, 3, 10) == P{7, 3});
  CHECK(longest_first_lengths(12, 10, 15) == P{8, 7});  // both shrink; longer a gets the odd one
  CHECK(longest_first_lengths(10, 12, 15) == P{7, 8});  // slow BertTokenizer would give {8, 7}
  CHECK(longest_first_lengths(10, 10, 15) == P{7, 8});  // tie: b gets the odd one
  CHECK(longest_first_lengths(10, 10, 14) == P{7, 7});
  CHECK(longest_first_lengths(30, 30, 9) == P{4, 5});
  // Through encode: max 18 leaves 15 word pieces for 10 + 10.
  const auto& tok = bert();
  const std::string b = repeat("cat ", 10);
  Encoding e = tok.encode(repeat("the ", 10), &b, 18);
  REQUIRE(e.ids.size() == 18);
  CHECK(e.ids[8] == tok.sep_id());  // [CLS] + 7 + [SEP]
  CHECK(e.ids[9] == *tok.find("cat"));
  CHECK(e.type_ids[8] == 0);
  CHECK(e.type_ids[9] == 1);
}

TEST_CASE("bad inputs name the file and the fix", "[core][tokenizer]") {
  CHECK_THROWS_WITH(Tokenizer::from_files("/nonexistent/vocab.txt"),
                    Contains("/nonexistent/vocab.txt") && Contains("not found"));
  const auto no_cls = write_vocab("no_cls", {"[PAD]", "[UNK]", "[SEP]", "a"});
  CHECK_THROWS_AS(Tokenizer::from_files(no_cls), hp::InputError);
  CHECK_THROWS_WITH(Tokenizer::from_files(no_cls),
                    Contains(no_cls) && Contains("[CLS]") && Contains("use a BERT vocab.txt"));
  const auto no_pad = write_vocab("no_pad", {"[CLS]", "[UNK]", "[SEP]"});
  CHECK_THROWS_WITH(Tokenizer::from_files(no_pad), Contains("[PAD]"));
  CHECK_THROWS_AS(bert().token(30522), hp::InputError);
  CHECK(bert().token(101) == "[CLS]");
}

// ---- parity with Hugging Face -------------------------------------------------------------

namespace {

// HF's truncated encoding, rebuilt from its full one and the kept lengths the script checked.
Encoding truncated_reference(const Encoding& full, size_t keep_a, size_t keep_b, bool pair) {
  size_t n_a = 0;
  while (n_a + 2 < full.type_ids.size() && full.type_ids[n_a + 2] == 0) ++n_a;
  Encoding out;
  out.ids.push_back(full.ids[0]);
  out.ids.insert(out.ids.end(), full.ids.begin() + 1, full.ids.begin() + 1 + keep_a);
  out.ids.push_back(full.ids[n_a + 1]);
  out.type_ids.assign(out.ids.size(), 0);
  if (pair) {
    out.ids.insert(out.ids.end(), full.ids.begin() + 2 + n_a, full.ids.begin() + 2 + n_a + keep_b);
    out.ids.push_back(full.ids.back());
    out.type_ids.resize(out.ids.size(), 1);
  }
  return out;
}

}  // namespace

TEST_CASE("ids equal HF BertTokenizerFast on all GLUE, MNLI and UD text", "[.hf][tokenizer]") {
  const char* env = std::getenv("HP_TOKREF_DIR");
  const std::string dir = env ? env : std::string(HP_BINARY_DIR) + "/tokref";
  std::ifstream mf(dir + "/manifest.json");
  if (!mf) return hp::test::skip("no " + dir + "/manifest.json; run tools/tokenizer_reference.py --out " + dir);
  nlohmann::json manifest;
  mf >> manifest;
  const auto& tok = bert();
  const auto r = hp::test::compare_with_reference(tok, dir, manifest, [](const nlohmann::json& rec, int max_len) {
    const Encoding full{rec.at("ids").get<std::vector<int32_t>>(), rec.at("type_ids").get<std::vector<int32_t>>()};
    if (max_len == 0) return full;
    const auto& keep = rec.at("keep").at(std::to_string(max_len));
    return truncated_reference(full, keep[0].get<size_t>(), keep[1].get<size_t>(), !rec.at("b").is_null());
  });
  WARN("compared " << r.rows << " inputs (" << r.encodings << " encodings, with and without "
                   << "truncation) with HF " << manifest.at("tokenizers").get<std::string>() << ": " << r.mismatches
                   << " mismatches");
  INFO("first mismatch: " << r.first);
  REQUIRE(r.rows > 0);
  REQUIRE(r.mismatches == 0);
}
