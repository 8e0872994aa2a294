// WordPiece tokenizer; mirrors tokenizers 0.19 (Rust), the engine behind BertTokenizerFast.
// Pipeline per text: split out special tokens -> clean -> CJK padding -> NFD + strip Mn
// -> lower-case -> split on whitespace and punctuation -> greedy WordPiece.
#include "core/text/tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/base/errors.h"  // InputError, ConfigError
#include "core/base/log.h"

namespace hp::core {
namespace {

// HF's BertTokenizer limit; longer words (in code points) become [UNK].
constexpr size_t kMaxInputCharsPerWord = 100;
// Specials matched verbatim in raw text, as HF's added tokens (normalized=false).
const char* const kSpecialTokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

bool file_exists(const std::string& path) {
  std::ifstream f(path);
  return f.good();
}

// Rust's char::is_whitespace (the Unicode White_Space property), which tokenizers uses.
// Not Python's category Zs: U+2028/U+2029 differ, which is where fast and slow HF disagree.
bool is_whitespace(utf8proc_int32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Categories C* except \t \n \r, which count as whitespace.
bool is_control(utf8proc_int32_t c) {
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
bool is_punctuation(utf8proc_int32_t c) {
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
bool is_chinese_char(utf8proc_int32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// UTF-8 -> code points; an invalid byte becomes U+FFFD, which cleaning then drops.
std::vector<utf8proc_int32_t> decode_utf8(const std::string& s) {
  std::vector<utf8proc_int32_t> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(s.size());
  while (left > 0) {
    utf8proc_int32_t c = 0;
    utf8proc_ssize_t n = utf8proc_iterate(p, left, &c);
    if (n <= 0) {
      c = 0xFFFD;
      n = 1;
    }
    out.push_back(c);
    p += n;
    left -= n;
  }
  return out;
}

void append_utf8(utf8proc_int32_t c, std::string& out) {
  utf8proc_uint8_t buf[4];
  utf8proc_ssize_t n = utf8proc_encode_char(c, buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

// NFD with canonical reordering, then drops nonspacing marks (Mn), as tokenizers' strip_accents.
std::vector<utf8proc_int32_t> nfd_strip_accents(const std::vector<utf8proc_int32_t>& in) {
  std::vector<utf8proc_int32_t> nfd;
  nfd.reserve(in.size());
  utf8proc_int32_t buf[32];
  for (utf8proc_int32_t c : in) {
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
                       [](utf8proc_int32_t x, utf8proc_int32_t y) {
                         return utf8proc_get_property(x)->combining_class < utf8proc_get_property(y)->combining_class;
                       });
    }
    i = (j == i) ? i + 1 : j;
  }
  std::vector<utf8proc_int32_t> out;
  out.reserve(nfd.size());
  for (utf8proc_int32_t c : nfd) {
    if (utf8proc_category(c) != UTF8PROC_CATEGORY_MN) out.push_back(c);
  }
  return out;
}

}  // namespace

std::pair<size_t, size_t> longest_first_lengths(size_t n_a, size_t n_b, size_t budget) {
  if (n_a + n_b <= budget) return {n_a, n_b};
  // Port of tokenizers' truncate_encodings (LongestFirst). The slow BertTokenizer gives
  // the odd token to the other side when n_a <= n_b; we follow the fast one on purpose.
  size_t n1 = n_a;
  size_t n2 = n_b;
  const bool swap = n1 > n2;  // n1 is the shorter input
  if (swap) std::swap(n1, n2);
  n2 = n1 > budget ? n1 : std::max(n1, budget - n1);
  if (n1 + n2 > budget) {
    n1 = budget / 2;
    n2 = n1 + budget % 2;
  }
  if (swap) std::swap(n1, n2);
  return {std::min(n1, n_a), std::min(n2, n_b)};
}

WordPieceTokenizer WordPieceTokenizer::from_files(const std::string& vocab_txt, const TokenizerOptions& options) {
  std::ifstream in(vocab_txt, std::ios::binary);
  if (!in) {
    throw InputError(vocab_txt + ": vocab file not found or unreadable; pass the vocab.txt of " +
                     "the model (one WordPiece token per line)");
  }
  WordPieceTokenizer tok;
  tok.options_ = options;
  std::string line;
  long duplicates = 0;
  std::string first_duplicate;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF vocab files
    // Later duplicates win, as in HF's load_vocab (which accepts them too); said once, with the first.
    const auto id = static_cast<int32_t>(tok.id_to_token_.size());
    const auto [it, fresh] = tok.token_to_id_.emplace(line, id);
    if (!fresh) {
      if (duplicates++ == 0)
        first_duplicate =
            "'" + line + "' at lines " + std::to_string(it->second + 1) + " and " + std::to_string(id + 1);
      it->second = id;
    }
    tok.id_to_token_.push_back(line);
  }
  if (duplicates > 0)
    log_warn("tokenizer", vocab_txt + ": " + std::to_string(duplicates) + " token" +
                              (duplicates > 1 ? "s appear" : " appears") + " more than once (first " + first_duplicate +
                              "); as in Hugging Face the later line's id is used and the earlier id is never produced");
  for (const char* name : {"[CLS]", "[SEP]", "[UNK]", "[PAD]"}) {
    if (!tok.find(name)) {
      throw InputError(vocab_txt + ": vocab has no " + name + " token (" + std::to_string(tok.id_to_token_.size()) +
                       " entries read); use a BERT vocab.txt that lists [PAD], [UNK], [CLS], [SEP]");
    }
  }
  tok.cls_id_ = *tok.find("[CLS]");
  tok.sep_id_ = *tok.find("[SEP]");
  tok.unk_id_ = *tok.find("[UNK]");
  tok.pad_id_ = *tok.find("[PAD]");
  for (const char* name : kSpecialTokens) {
    if (auto id = tok.find(name)) tok.specials_.emplace_back(name, *id);
  }
  return tok;
}

TokenizerOptions WordPieceTokenizer::read_options(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw InputError(path + ": tokenizer config not found or unreadable; check the model folder");
  }
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not valid JSON (" + e.what() + "); fix or remove the file");
  }
  TokenizerOptions opt;
  auto read_bool = [&](const char* key, bool& dst) {
    if (!j.contains(key) || j[key].is_null()) return;
    if (!j[key].is_boolean()) {
      throw InputError(path + ": " + key + " = " + j[key].dump() + ", expected true or false; " + "fix the value");
    }
    dst = j[key].get<bool>();
  };
  read_bool("do_lower_case", opt.lower_case);
  read_bool("tokenize_chinese_chars", opt.tokenize_chinese_chars);
  if (j.contains("strip_accents") && !j["strip_accents"].is_null()) {
    bool strip = false;
    read_bool("strip_accents", strip);
    opt.strip_accents = strip;
  }
  return opt;
}

WordPieceTokenizer WordPieceTokenizer::from_model_dir(const std::string& dir) {
  const std::string config = dir + "/tokenizer_config.json";
  TokenizerOptions opt;
  if (file_exists(config)) opt = read_options(config);
  auto tok = from_files(dir + "/vocab.txt", opt);
  // A token id at or past the model's vocab_size has no embedding row: refuse here, by name, rather than
  // as an index error in the middle of a forward (a malformed config.json is the model loader's to report).
  std::ifstream model_config(dir + "/config.json");
  const auto j = nlohmann::json::parse(model_config, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("vocab_size") && j["vocab_size"].is_number_integer()) {
    const auto vocab_size = j["vocab_size"].get<int64_t>();
    if (static_cast<int64_t>(tok.vocab_size()) > vocab_size)
      throw InputError(dir + "/vocab.txt: " + std::to_string(tok.vocab_size()) +
                       " tokens, more than config.json's vocab_size " + std::to_string(vocab_size) + " (ids from " +
                       std::to_string(vocab_size) +
                       " up have no embedding); use the vocab.txt that belongs to this model");
  }
  return tok;
}

std::optional<int32_t> WordPieceTokenizer::find(const std::string& token) const {
  auto it = token_to_id_.find(token);
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

const std::string& WordPieceTokenizer::token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) {
    throw InputError("tokenizer: token id " + std::to_string(id) + " outside the vocab of " +
                     std::to_string(id_to_token_.size()) + "; use ids from this vocab");
  }
  return id_to_token_[static_cast<size_t>(id)];
}

void WordPieceTokenizer::word_piece(const std::string& word, std::vector<int32_t>& ids) const {
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
    std::optional<int32_t> piece;
    size_t end = n;
    for (; end > start; --end) {
      key.assign(start > 0 ? "##" : "");
      key.append(word, offs[start], offs[end] - offs[start]);
      if ((piece = find(key))) break;
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

void WordPieceTokenizer::tokenize_plain(const std::string& text, std::vector<int32_t>& ids) const {
  // Normalizer (BertNormalizer): clean, pad CJK, strip accents, lower-case, in this order.
  std::vector<utf8proc_int32_t> cps;
  {
    std::vector<utf8proc_int32_t> raw = decode_utf8(text);
    cps.reserve(raw.size());
    for (utf8proc_int32_t c : raw) {
      if (c == 0 || c == 0xFFFD || is_control(c)) continue;
      if (is_whitespace(c)) {
        cps.push_back(' ');
      } else if (options_.tokenize_chinese_chars && is_chinese_char(c)) {
        cps.insert(cps.end(), {' ', c, ' '});
      } else {
        cps.push_back(c);
      }
    }
  }
  if (options_.strip_accents.value_or(options_.lower_case)) cps = nfd_strip_accents(cps);
  if (options_.lower_case) {
    std::vector<utf8proc_int32_t> lower;
    lower.reserve(cps.size());
    for (utf8proc_int32_t c : cps) {
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
  // Pre-tokenizer (BertPreTokenizer): split on whitespace, isolate each punctuation char.
  std::string word;
  auto flush = [&] {
    if (!word.empty()) word_piece(word, ids);
    word.clear();
  };
  for (utf8proc_int32_t c : cps) {
    if (is_whitespace(c)) {
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

std::vector<int32_t> WordPieceTokenizer::tokenize_ids(const std::string& text) const {
  std::vector<int32_t> ids;
  // Split out special tokens first, leftmost-longest, before any normalization (HF added
  // tokens with normalized=false): "x[SEP]y" gives x, [SEP], y.
  size_t plain_from = 0;
  for (size_t pos = 0; pos < text.size();) {
    const std::pair<std::string, int32_t>* best = nullptr;
    if (text[pos] == '[') {
      for (const auto& sp : specials_) {
        if (text.compare(pos, sp.first.size(), sp.first) == 0 && (!best || sp.first.size() > best->first.size())) {
          best = &sp;
        }
      }
    }
    if (!best) {
      ++pos;
      continue;
    }
    tokenize_plain(text.substr(plain_from, pos - plain_from), ids);
    ids.push_back(best->second);
    pos += best->first.size();
    plain_from = pos;
  }
  tokenize_plain(text.substr(plain_from), ids);
  return ids;
}

std::vector<std::string> WordPieceTokenizer::tokenize(const std::string& text) const {
  std::vector<std::string> out;
  for (int32_t id : tokenize_ids(text)) out.push_back(id_to_token_[static_cast<size_t>(id)]);
  return out;
}

Encoding WordPieceTokenizer::encode(const std::string& a, const std::string* b, int max_seq_len) const {
  const size_t n_specials = b ? 3 : 2;
  if (max_seq_len < 0 || (max_seq_len > 0 && static_cast<size_t>(max_seq_len) < n_specials)) {
    throw ConfigError("tokenizer: max_seq_len = " + std::to_string(max_seq_len) + " cannot hold " +
                      std::to_string(n_specials) +
                      " special tokens; use 0 (no truncation) or >= " + std::to_string(n_specials));
  }
  std::vector<int32_t> ids_a = tokenize_ids(a);
  std::vector<int32_t> ids_b;
  if (b) ids_b = tokenize_ids(*b);
  if (max_seq_len > 0) {
    const size_t budget = static_cast<size_t>(max_seq_len) - n_specials;
    if (b) {
      auto [keep_a, keep_b] = longest_first_lengths(ids_a.size(), ids_b.size(), budget);
      ids_a.resize(keep_a);
      ids_b.resize(keep_b);
    } else if (ids_a.size() > budget) {
      ids_a.resize(budget);
    }
  }
  Encoding enc;
  enc.ids.reserve(ids_a.size() + ids_b.size() + n_specials);
  enc.ids.push_back(cls_id_);
  enc.ids.insert(enc.ids.end(), ids_a.begin(), ids_a.end());
  enc.ids.push_back(sep_id_);
  enc.type_ids.assign(enc.ids.size(), 0);
  if (b) {
    enc.ids.insert(enc.ids.end(), ids_b.begin(), ids_b.end());
    enc.ids.push_back(sep_id_);
    enc.type_ids.resize(enc.ids.size(), 1);
  }
  return enc;
}

}  // namespace hp::core
