// Byte-level BPE (RoBERTa) and SentencePiece (XLM-R) tokenizers: the pre-tokenizer's regex on hand-made strings
// and GPT-2's byte map (expected values written out once from HF tokenizers 0.19.1 and openai/gpt-2's
// encoder.py), BPE merges on a tiny hand-made vocab (worked by hand, then checked against RobertaTokenizerFast),
// the layouts, bad files, and id-for-id parity with HF RobertaTokenizerFast / XLMRobertaTokenizer on all GLUE,
// MNLI subset and UD EWT text (tokenizers trained by tools/train_tokenizers.py, references written by
// tools/tokenizer_reference.py --kind bpe|spm).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/errors.h"  // InputError, ConfigError
#include "core/text/bpe.h"
#include "core/text/tokenizer.h"
#include "fixtures.h"
#include "skip.h"
#include "tokref.h"

using Catch::Matchers::Contains;
using hp::core::Encoding;
using hp::core::Tokenizer;
using hp::core::TokenizerKind;
using Ids = std::vector<int32_t>;
using Strings = std::vector<std::string>;

namespace {

Strings split(const std::string& text) {
  Strings out;
  for (std::string_view piece : hp::core::text::byte_level_split(text)) out.emplace_back(piece);
  return out;
}

std::string write_file(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
  return path.string();
}

std::string utf8(int32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

// The tiny RoBERTa vocab: <s>=0 <pad>=1 </s>=2 <unk>=3 <mask>=4, byte b at 5+b (its GPT-2 char; 'z' left
// out), then the merges' results: ab=261 abc=262 bc=263 Ġa=264 cc=265 aa=266.
const char* const kTinyMerges = "#version: 0.2\na b\nab c\nb c\n\xC4\xA0 a\nc c\na a\n";

std::string tiny_vocab_json() {
  nlohmann::json v;
  const char* specials[] = {"<s>", "<pad>", "</s>", "<unk>", "<mask>"};
  for (int i = 0; i < 5; ++i) v[specials[i]] = i;
  for (int b = 0; b < 256; ++b) {
    if (b != 'z') v[utf8(hp::core::text::bytes_to_unicode()[static_cast<size_t>(b)])] = 5 + b;
  }
  const char* merged[] = {"ab",
                          "abc",
                          "bc",
                          "\xC4\xA0"
                          "a",
                          "cc",
                          "aa"};
  for (int i = 0; i < 6; ++i) v[merged[i]] = 261 + i;
  return v.dump();
}

const Tokenizer& tiny() {
  static const Tokenizer tok = [] {
    const auto dir = hp::test::scratch_dir("bpe_tiny");
    return Tokenizer::from_bpe_files(write_file(dir / "vocab.json", tiny_vocab_json()),
                                     write_file(dir / "merges.txt", kTinyMerges));
  }();
  return tok;
}

}  // namespace

TEST_CASE("bytes_to_unicode is GPT-2's byte map", "[core][tokenizer]") {
  const auto& m = hp::core::text::bytes_to_unicode();
  // Values from openai/gpt-2 encoder.py's bytes_to_unicode().
  CHECK(m[0] == 0x100);
  CHECK(m['\t'] == 0x109);
  CHECK(m['\n'] == 0x10A);
  CHECK(m[' '] == 0x120);  // 'Ġ'
  CHECK(m['!'] == '!');
  CHECK(m['~'] == '~');
  CHECK(m[0x7F] == 0x121);
  CHECK(m[0x80] == 0x122);
  CHECK(m[0xA0] == 0x142);
  CHECK(m[0xA1] == 0xA1);
  CHECK(m[0xAC] == 0xAC);
  CHECK(m[0xAD] == 0x143);  // soft hyphen: the last remapped byte
  CHECK(m[0xAE] == 0xAE);
  CHECK(m[0xFF] == 0xFF);
  std::vector<int32_t> sorted(m.begin(), m.end());
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());  // a bijection
}

TEST_CASE("byte-level pre-tokenizer splits as GPT-2's regex", "[core][tokenizer]") {
  // Expected splits from tokenizers 0.19.1: pre_tokenizers.ByteLevel(add_prefix_space=False).pre_tokenize_str,
  // its byte-mapped pieces written back as text.
  CHECK(split("I'm can't we'll they'd you've it's we're") ==
        Strings{"I", "'m", " can", "'t", " we", "'ll", " they", "'d", " you", "'ve", " it", "'s", " we", "'re"});
  CHECK(split("Don'T 'S") == Strings{"Don", "'", "T", " '", "S"});  // contractions are lower case only
  CHECK(split("ab'sc") == Strings{"ab", "'s", "c"});
  CHECK(split("  word") == Strings{" ", " word"});  // \s+(?!\S) leaves the last space to the word
  CHECK(split("a  b") == Strings{"a", " ", " b"});
  CHECK(split("\n\nx") == Strings{"\n", "\n", "x"});  // only U+0020 joins the word; \n then stands alone
  CHECK(split("a\tb\t\tc") == Strings{"a", "\t", "b", "\t", "\t", "c"});
  CHECK(split("x   ") == Strings{"x", "   "});  // trailing whitespace: one piece
  CHECK(split(" ") == Strings{" "});
  CHECK(split("abc123 4.5") == Strings{"abc", "123", " 4", ".", "5"});
  CHECK(split("hello \xF0\x9F\x98\x80 world") == Strings{"hello", " \xF0\x9F\x98\x80", " world"});  // emoji: So
  CHECK(split("a --b") == Strings{"a", " --", "b"});
  CHECK(split("\xC2\xBFQu\xC3\xA9 tal?") == Strings{"\xC2\xBF", "Qu\xC3\xA9", " tal", "?"});
  // U+00A0 and U+2028 are \s (Zs, Zl) but not U+0020, U+3000 too.
  CHECK(split("\xC2\xA0x\xE2\x80\xA8y") == Strings{"\xC2\xA0", "x", "\xE2\x80\xA8", "y"});
  CHECK(split("x\xE3\x80\x80 y") == Strings{"x", "\xE3\x80\x80", " y"});
  CHECK(split("").empty());
}

TEST_CASE("tiny BPE: lowest rank first, leftmost on ties", "[core][tokenizer]") {
  const auto& tok = tiny();
  CHECK(tok.kind() == TokenizerKind::kByteLevelBpe);
  CHECK(tok.vocab_size() == 267);
  CHECK(tok.cls_id() == 0);
  CHECK(tok.pad_id() == 1);
  CHECK(tok.sep_id() == 2);
  CHECK(tok.unk_id() == 3);
  CHECK(tok.mask_id() == 4);
  CHECK(tok.tokenize_ids("abc") == Ids{262});  // a b c -> ab c (rank 0) -> abc (rank 1)
  CHECK(tok.tokenize_ids("bcab") == Ids{263, 261});  // ab (rank 0) before bc (rank 2)
  CHECK(tok.tokenize_ids("aaa") == Ids{266, 5 + 'a'});  // two equal-rank pairs: the left one
  CHECK(tok.tokenize_ids("ccc") == Ids{265, 5 + 'c'});
  CHECK(tok.tokenize_ids(" abc") == Ids{5 + ' ', 262});  // ab (0) beats Ġa (3), then Ġ+ab has no merge
  CHECK(tok.tokenize(" abc") == Strings{"\xC4\xA0", "abc"});
  // A byte the vocab lacks is dropped, as RobertaTokenizerFast does (its BPE has no unk token): a and b meet.
  CHECK(tok.tokenize_ids("azb") == Ids{261});
}

TEST_CASE("tiny BPE: added tokens and <mask>'s lstrip", "[core][tokenizer]") {
  const auto& tok = tiny();
  const int32_t h = 5 + 'h', i = 5 + 'i', sp = 5 + ' ';
  CHECK(tok.tokenize_ids("<s>hi</s>") == Ids{0, h, i, 2});
  CHECK(tok.tokenize_ids("hi <mask> hi") == Ids{h, i, 4, sp, h, i});  // the space left of <mask> is absorbed
  CHECK(tok.tokenize_ids("hi \t <mask>") == Ids{h, i, 4});
  CHECK(tok.tokenize_ids("<s> <pad>") == Ids{0, sp, 1});  // no lstrip on the others
  CHECK(tok.tokenize_ids("<mas") == Ids{5 + '<', 5 + 'm', 5 + 'a', 5 + 's'});
}

TEST_CASE("RoBERTa layout: <s> a </s></s> b </s>, one token type, 4 specials in a pair", "[core][tokenizer]") {
  const auto& tok = tiny();
  const std::string c = "c";
  Encoding pair = tok.encode("ab", &c, 0);
  CHECK(pair.ids == Ids{0, 261, 2, 2, 5 + 'c', 2});
  CHECK(pair.type_ids == Ids{0, 0, 0, 0, 0, 0});
  // "aaa aaa" -> aa a | Ġa aa; max 4 keeps 2 of them.
  CHECK(tok.tokenize_ids("aaa aaa") == Ids{266, 5 + 'a', 264, 266});
  CHECK(tok.encode("aaa aaa", nullptr, 4).ids == Ids{0, 266, 5 + 'a', 2});
  const std::string ccc = "ccc";
  CHECK(tok.encode("aaa", &ccc, 6).ids == Ids{0, 266, 2, 2, 265, 2});
  CHECK(tok.encode("aaa", &ccc, 4).ids == Ids{0, 2, 2, 2});
  CHECK_THROWS_AS(tok.encode("aaa", &ccc, 3), hp::ConfigError);
  CHECK_THROWS_WITH(tok.encode("aaa", &ccc, 3), Contains("cannot hold 4 special tokens"));
}

TEST_CASE("add_prefix_space puts a space before text that starts without one", "[core][tokenizer]") {
  const auto dir = hp::test::scratch_dir("bpe_prefix");
  hp::core::TokenizerOptions opt;
  opt.add_prefix_space = true;
  const auto tok = Tokenizer::from_bpe_files(write_file(dir / "vocab.json", tiny_vocab_json()),
                                             write_file(dir / "merges.txt", kTinyMerges), opt);
  // Checked with RobertaTokenizerFast(add_prefix_space=True): Ġa wins here, as no ab follows.
  CHECK(tok.tokenize_ids("ac") == Ids{264, 5 + 'c'});
  CHECK(tok.tokenize_ids(" ac") == Ids{264, 5 + 'c'});  // already there: not doubled
  CHECK(tok.tokenize_ids("ac<mask>ac") == Ids{264, 5 + 'c', 4, 264, 5 + 'c'});  // each part apart
}

TEST_CASE("bad BPE files name the file, the line and the fix", "[core][tokenizer]") {
  const auto dir = hp::test::scratch_dir("bpe_bad");
  const auto vocab = write_file(dir / "vocab.json", tiny_vocab_json());
  const auto merges = write_file(dir / "merges.txt", kTinyMerges);
  auto load = [&](const std::string& v, const std::string& m) { return Tokenizer::from_bpe_files(v, m); };
  CHECK_THROWS_WITH(load((dir / "none.json").string(), merges), Contains("none.json: not found"));
  const auto bad_json = write_file(dir / "bad.json", "{\"a\": 1,");
  CHECK_THROWS_AS(load(bad_json, merges), hp::InputError);
  CHECK_THROWS_WITH(load(bad_json, merges), Contains("bad.json: not valid JSON") && Contains("save_pretrained"));
  CHECK_THROWS_WITH(load(write_file(dir / "list.json", "[1, 2]"), merges), Contains("expected a JSON object"));
  CHECK_THROWS_WITH(load(write_file(dir / "float.json", "{\"a\": 1.5}"), merges),
                    Contains("token 'a' has id 1.5, expected an integer"));
  CHECK_THROWS_WITH(load(write_file(dir / "dup.json", "{\"a\": 1, \"b\": 1}"), merges),
                    Contains("tokens 'a' and 'b' both have id 1"));
  auto bad_merges = [&](const std::string& name, const std::string& text) {
    return load(vocab, write_file(dir / name, text));
  };
  CHECK_THROWS_WITH(bad_merges("one.txt", "#version: 0.2\na b\nabc\n"),
                    Contains("one.txt:3: expected two pieces separated by one space, got 'abc'"));
  CHECK_THROWS_WITH(bad_merges("three.txt", "a b c\n"), Contains("three.txt:1: expected two pieces"));
  CHECK_THROWS_WITH(bad_merges("blank.txt", "a b\n\nb c\n"), Contains("blank.txt:2: expected two pieces"));
  CHECK_THROWS_WITH(bad_merges("oov.txt", "a z\n"),
                    Contains("oov.txt:1: merge 'a z' names 'z', which ") && Contains("vocab.json lacks"));
  CHECK_THROWS_WITH(bad_merges("oov2.txt", "b a\n"), Contains("names 'ba'"));  // the merged piece too
  CHECK_THROWS_WITH(bad_merges("rep.txt", "a b\nb c\na b\n"), Contains("rep.txt:3: merge 'a b' repeats line 1"));
  // Without <s>, </s>, <unk> or <pad> there is no RoBERTa layout.
  CHECK_THROWS_WITH(
      load(write_file(dir / "nos.json", "{\"a\": 0, \"b\": 1, \"ab\": 2}"), write_file(dir / "ab.txt", "a b\n")),
      Contains("vocab has no <s> token") && Contains("use a RoBERTa vocab.json"));
}

TEST_CASE("from_model_dir picks the tokenizer by its files", "[core][tokenizer]") {
  const auto dir = hp::test::scratch_dir("tok_dirs");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "empty");
  CHECK_THROWS_WITH(Tokenizer::from_model_dir((dir / "empty").string()),
                    Contains("empty: no tokenizer files (looked for vocab.txt, vocab.json + merges.txt, "
                             "sentencepiece.bpe.model)"));
  write_file(dir / "half" / "vocab.json", tiny_vocab_json());
  CHECK_THROWS_WITH(Tokenizer::from_model_dir((dir / "half").string()),
                    Contains("half/merges.txt: not found") && Contains("needs both"));
  write_file(dir / "roberta" / "vocab.json", tiny_vocab_json());
  write_file(dir / "roberta" / "merges.txt", kTinyMerges);
  CHECK(Tokenizer::from_model_dir((dir / "roberta").string()).kind() == TokenizerKind::kByteLevelBpe);
  write_file(dir / "roberta" / "config.json", "{\"vocab_size\": 200}");
  CHECK_THROWS_WITH(Tokenizer::from_model_dir((dir / "roberta").string()),
                    Contains("vocab.json: 267 tokens, more than config.json's vocab_size 200"));
  write_file(dir / "xlmr" / "sentencepiece.bpe.model", "not a model");
  CHECK_THROWS_AS(Tokenizer::from_model_dir((dir / "xlmr").string()), hp::InputError);
  CHECK_THROWS_WITH(Tokenizer::from_model_dir((dir / "xlmr").string()),
                    Contains("sentencepiece.bpe.model: cannot load the SentencePiece model") &&
                        Contains("XLMRobertaTokenizer.save_pretrained"));
  CHECK(Tokenizer::from_model_dir(hp::test::kSharedVocab).kind() == TokenizerKind::kWordPiece);
}

TEST_CASE("tokenizer_config.json's added tokens: ids, lstrip and rstrip", "[core][tokenizer]") {
  const auto dir = hp::test::scratch_dir("tok_added");
  const auto config = write_file(dir / "tokenizer_config.json", R"({"added_tokens_decoder": {
    "0": {"content": "<s>"}, "1": {"content": "<pad>"}, "2": {"content": "</s>"}, "3": {"content": "<unk>"},
    "267": {"content": "<new>", "lstrip": false, "rstrip": true}}})");
  const auto tok =
      Tokenizer::from_bpe_files(write_file(dir / "vocab.json", tiny_vocab_json()),
                                write_file(dir / "merges.txt", kTinyMerges), {}, Tokenizer::read_added_tokens(config));
  CHECK(tok.vocab_size() == 268);
  CHECK(tok.token(267) == "<new>");
  CHECK(tok.tokenize_ids("c <new>  c") == Ids{5 + 'c', 5 + ' ', 267, 5 + 'c'});  // rstrip eats both spaces
  CHECK(tok.tokenize_ids("c <mask>") == Ids{5 + 'c', 5 + ' ', 5 + '<', 5 + 'm', 5 + 'a', 5 + 's', 5 + 'k', 5 + '>'});
  write_file(dir / "bad_config.json", R"({"added_tokens_decoder": {"x": {"content": "<s>"}}})");
  CHECK_THROWS_WITH(Tokenizer::read_added_tokens((dir / "bad_config.json").string()),
                    Contains("added_tokens_decoder[\"x\"] is not a token id"));
}

// ---- parity with Hugging Face -------------------------------------------------------------

namespace {

// HF's truncated encoding, rebuilt from its full one (<s> a </s>(</s> b </s>), a and b of n_a and n_b pieces).
Ids truncated_reference(const Ids& full, size_t n_a, size_t keep_a, size_t keep_b, bool pair) {
  Ids out{full[0]};
  out.insert(out.end(), full.begin() + 1, full.begin() + 1 + static_cast<std::ptrdiff_t>(keep_a));
  out.push_back(full[n_a + 1]);
  if (pair) {
    const auto b = full.begin() + static_cast<std::ptrdiff_t>(n_a + 3);
    out.push_back(full[n_a + 2]);
    out.insert(out.end(), b, b + static_cast<std::ptrdiff_t>(keep_b));
    out.push_back(full.back());
  }
  return out;
}

// Every record of the reference in `dir` (tools/tokenizer_reference.py --kind bpe|spm), with and without
// truncation, against the tokenizer of the folder its manifest names.
void check_parity(const std::string& dir, TokenizerKind kind) {
  std::ifstream mf(dir + "/manifest.json");
  if (!mf) {
    return hp::test::skip("no " + dir + "/manifest.json; run tools/train_tokenizers.py and " +
                          "tools/tokenizer_reference.py --kind bpe|spm --out " + dir);
  }
  nlohmann::json manifest;
  mf >> manifest;
  const auto tok = Tokenizer::from_model_dir(manifest.at("tokenizer_dir").get<std::string>());
  REQUIRE(tok.kind() == kind);
  const auto r = hp::test::compare_with_reference(tok, dir, manifest, [](const nlohmann::json& rec, int max_len) {
    const Ids ids = rec.at("ids").get<Ids>();
    Encoding want;
    if (max_len == 0) {
      want.ids = ids;
    } else {
      const auto& keep = rec.at("keep").at(std::to_string(max_len));
      want.ids = truncated_reference(ids, rec.at("n")[0].get<size_t>(), keep[0].get<size_t>(), keep[1].get<size_t>(),
                                     !rec.at("b").is_null());
    }
    want.type_ids.assign(want.ids.size(), 0);  // one token type
    return want;
  });
  WARN("compared " << r.rows << " inputs (" << r.encodings << " encodings, with and without truncation) with HF "
                   << manifest.at("tokenizers").get<std::string>() << " (" << manifest.at("kind").get<std::string>()
                   << "): " << r.mismatches << " mismatches");
  INFO("first mismatch: " << r.first);
  REQUIRE(r.rows > 0);
  REQUIRE(r.mismatches == 0);
}

std::string reference_dir(const char* env, const char* name) {
  const char* set = std::getenv(env);
  return set ? set : std::string(HP_BINARY_DIR) + "/" + name;
}

}  // namespace

TEST_CASE("ids equal HF RobertaTokenizerFast on all GLUE, MNLI and UD text", "[.hf][tokenizer][bpe]") {
  check_parity(reference_dir("HP_TOKREF_BPE_DIR", "tokref_bpe"), TokenizerKind::kByteLevelBpe);
}

TEST_CASE("ids equal HF XLMRobertaTokenizer on all GLUE, MNLI and UD text", "[.hf][tokenizer][spm]") {
  check_parity(reference_dir("HP_TOKREF_SPM_DIR", "tokref_spm"), TokenizerKind::kSentencePiece);
}

TEST_CASE("XLM-R ids: the fairseq head, the offset of one, <mask> last", "[.hf][tokenizer][spm]") {
  const std::string dir = reference_dir("HP_TOKREF_SPM_DIR", "tokref_spm");
  std::ifstream mf(dir + "/manifest.json");
  if (!mf) return hp::test::skip("no " + dir + "/manifest.json; run tools/tokenizer_reference.py --kind spm");
  const auto tok = Tokenizer::from_model_dir(nlohmann::json::parse(mf).at("tokenizer_dir").get<std::string>());
  // tools/train_tokenizers.py: 4000 pieces, <unk>=0 <s>=1 </s>=2 in the model.
  CHECK(tok.vocab_size() == 4002);
  CHECK(tok.cls_id() == 0);
  CHECK(tok.pad_id() == 1);
  CHECK(tok.sep_id() == 2);
  CHECK(tok.unk_id() == 3);
  CHECK(tok.mask_id() == 4001);
  CHECK(tok.token(0) == "<s>");
  CHECK(tok.token(3) == "<unk>");
  CHECK(tok.token(4001) == "<mask>");
  // A character outside the model (coverage 0.9995) is the model's <unk> (0), which is fairseq's 3.
  const Ids ids = tok.tokenize_ids("\xE2\x98\x83");  // U+2603 snowman
  REQUIRE(!ids.empty());
  CHECK(ids.back() == 3);
  CHECK(tok.tokenize_ids("the <mask>") == Ids{*tok.find("\xE2\x96\x81the"), 4001});
  const std::string b = "the";
  CHECK(tok.encode("the", &b, 0).ids == Ids{0, *tok.find("\xE2\x96\x81the"), 2, 2, *tok.find("\xE2\x96\x81the"), 2});
}
