// WordPiece (BERT); mirrors tokenizers 0.19 (Rust), the engine behind BertTokenizerFast.
// Pipeline per text without added tokens: clean -> CJK padding -> NFD + strip Mn -> lower-case
// -> split on whitespace and punctuation -> greedy WordPiece.
#include <utf8proc.h>

#include <algorithm>
#include <fstream>
#include <memory>

#include "core/base/errors.h"  // InputError
#include "core/base/log.h"
#include "core/text/token_model.h"
#include "core/text/tokenizer.h"
#include "core/text/unicode.h"

namespace hp::core {
namespace {

using text::append_utf8;
using text::is_rust_whitespace;

// HF's BertTokenizer limit; longer words (in code points) become [UNK].
constexpr size_t kMaxInputCharsPerWord = 100;

// Categories C* except \t \n \r, which count as whitespace.
bool is_control(int32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN: return true;
    default: return false;
  }
}

// HF's _is_punctuation: all non-alphanumeric ASCII (33-47, 58-64, 91-96, 123-126), plus P*.
bool is_punctuation(int32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) {
    return true;
  }
  switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO: return true;
    default: return false;
  }
}

// HF's _is_chinese_char: the CJK Unified Ideographs blocks (not Hangul, kana or CJK punctuation).
bool is_chinese_char(int32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// NFD with canonical reordering, then drops nonspacing marks (Mn), as tokenizers' strip_accents.
std::vector<int32_t> nfd_strip_accents(const std::vector<int32_t>& in) {
  std::vector<int32_t> nfd;
  nfd.reserve(in.size());
  utf8proc_int32_t buf[32];
  for (int32_t c : in) {
    int boundclass = UTF8PROC_BOUNDCLASS_START;
    utf8proc_ssize_t n = utf8proc_decompose_char(c, buf, 32, UTF8PROC_DECOMPOSE, &boundclass);
    if (n < 0 || n > 32) {
      nfd.push_back(c);
      continue;
    }
    nfd.insert(nfd.end(), buf, buf + n);
  }
  // Canonical ordering: stable sort of each run of non-starters by combining class.
  for (size_t i = 0; i < nfd.size();) {
    size_t j = i;
    while (j < nfd.size() && utf8proc_get_property(nfd[j])->combining_class != 0) ++j;
    if (j - i > 1) {
      std::stable_sort(nfd.begin() + static_cast<std::ptrdiff_t>(i), nfd.begin() + static_cast<std::ptrdiff_t>(j),
                       [](int32_t x, int32_t y) {
                         return utf8proc_get_property(x)->combining_class < utf8proc_get_property(y)->combining_class;
                       });
    }
    i = (j == i) ? i + 1 : j;
  }
  std::vector<int32_t> out;
  out.reserve(nfd.size());
  for (int32_t c : nfd) {
    if (utf8proc_category(c) != UTF8PROC_CATEGORY_MN) out.push_back(c);
  }
  return out;
}

class WordPieceModel : public text::TokenModel {
 public:
  WordPieceModel(std::shared_ptr<const text::Vocab> vocab, const TokenizerOptions& options, int32_t unk_id)
      : vocab_(std::move(vocab)), options_(options), unk_id_(unk_id) {}
  void encode(std::string_view text, std::vector<int32_t>& ids) const override;

 private:
  // BertNormalizer: clean, pad CJK, strip accents, lower-case, in this order.
  std::vector<int32_t> normalize(std::string_view text) const;
  // Appends the ids of one normalized, pre-tokenized word (greedy longest match first).
  void word_piece(const std::string& word, std::vector<int32_t>& ids) const;

  std::shared_ptr<const text::Vocab> vocab_;
  TokenizerOptions options_;
  int32_t unk_id_;
};

std::vector<int32_t> WordPieceModel::normalize(std::string_view text) const {
  std::vector<int32_t> cps;
  const std::vector<int32_t> raw = text::decode_utf8(text);
  cps.reserve(raw.size());
  for (int32_t c : raw) {
    if (c == 0 || c == 0xFFFD || is_control(c)) continue;
    if (is_rust_whitespace(c)) {
      cps.push_back(' ');
    } else if (options_.tokenize_chinese_chars && is_chinese_char(c)) {
      cps.insert(cps.end(), {' ', c, ' '});
    } else {
      cps.push_back(c);
    }
  }
  if (options_.strip_accents.value_or(options_.lower_case)) cps = nfd_strip_accents(cps);
  if (options_.lower_case) {
    std::vector<int32_t> lower;
    lower.reserve(cps.size());
    for (int32_t c : cps) {
      // Rust's full lower-case mapping; U+0130 is the one code point whose full mapping
      // (SpecialCasing.txt) differs from utf8proc's simple one.
      if (c == 0x130) {
        lower.insert(lower.end(), {0x69, 0x307});
      } else {
        lower.push_back(utf8proc_tolower(c));
      }
    }
    cps.swap(lower);
  }
  return cps;
}

void WordPieceModel::word_piece(const std::string& word, std::vector<int32_t>& ids) const {
  // Byte offset of each code point, plus the end.
  std::vector<size_t> offs;
  offs.reserve(word.size() + 1);
  for (size_t i = 0; i < word.size(); ++i) {
    if ((static_cast<unsigned char>(word[i]) & 0xC0) != 0x80) offs.push_back(i);
  }
  const size_t n = offs.size();
  offs.push_back(word.size());
  if (n > kMaxInputCharsPerWord) {
    ids.push_back(unk_id_);
    return;
  }
  const size_t first = ids.size();
  std::string key;
  for (size_t start = 0; start < n;) {
    const int32_t* piece = nullptr;
    size_t end = n;
    for (; end > start; --end) {
      key.assign(start > 0 ? "##" : "");
      key.append(word, offs[start], offs[end] - offs[start]);
      if ((piece = vocab_->find(key))) break;
    }
    if (!piece) {  // no piece matches: the whole word is [UNK], pieces so far dropped
      ids.resize(first);
      ids.push_back(unk_id_);
      return;
    }
    ids.push_back(*piece);
    start = end;
  }
}

void WordPieceModel::encode(std::string_view text, std::vector<int32_t>& ids) const {
  // Pre-tokenizer (BertPreTokenizer): split on whitespace, isolate each punctuation char.
  std::string word;
  auto flush = [&] {
    if (!word.empty()) word_piece(word, ids);
    word.clear();
  };
  for (int32_t c : normalize(text)) {
    if (is_rust_whitespace(c)) {
      flush();
    } else if (is_punctuation(c)) {
      flush();
      append_utf8(c, word);
      flush();
    } else {
      append_utf8(c, word);
    }
  }
  flush();
}

}  // namespace

Tokenizer Tokenizer::from_files(const std::string& vocab_txt, const TokenizerOptions& options) {
  std::ifstream in(vocab_txt, std::ios::binary);
  if (!in) {
    throw InputError(vocab_txt + ": vocab file not found or unreadable; pass the vocab.txt of " +
                     "the model (one WordPiece token per line)");
  }
  auto vocab = std::make_shared<text::Vocab>();
  std::string line;
  long duplicates = 0;
  std::string first_duplicate;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF vocab files
    // Later duplicates win, as in HF's load_vocab (which accepts them too); said once, with the first.
    const auto id = static_cast<int32_t>(vocab->id_to_token.size());
    const auto [it, fresh] = vocab->token_to_id.emplace(line, id);
    if (!fresh) {
      if (duplicates++ == 0)
        first_duplicate =
            "'" + line + "' at lines " + std::to_string(it->second + 1) + " and " + std::to_string(id + 1);
      it->second = id;
    }
    vocab->id_to_token.push_back(line);
  }
  if (duplicates > 0)
    log_warn("tokenizer", vocab_txt + ": " + std::to_string(duplicates) + " token" +
                              (duplicates > 1 ? "s appear" : " appears") + " more than once (first " + first_duplicate +
                              "); as in Hugging Face the later line's id is used and the earlier id is never produced");
  Tokenizer tok;
  tok.kind_ = TokenizerKind::kWordPiece;
  tok.options_ = options;
  tok.set_specials({}, *vocab, vocab_txt);
  tok.model_ = std::make_shared<WordPieceModel>(vocab, options, tok.unk_id_);
  tok.vocab_ = std::move(vocab);
  return tok;
}

}  // namespace hp::core
