// Byte-level BPE (RoBERTa), a port of tokenizers 0.19: the ByteLevel pre-tokenizer (GPT-2's regex, written out
// by hand over code points, then bytes_to_unicode) and BPE's Word::merge_all (a priority queue of merges: lowest
// rank first, leftmost on ties). vocab.json and merges.txt are read as tokenizers' BPE::read_file and
// BpeBuilder::build read them, stricter where the two HF loaders disagree (see load_merges).
#include "core/text/bpe.h"

#include <utf8proc.h>

#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <string>
#include <unordered_map>

#include "core/base/errors.h"  // InputError
#include "core/text/token_model.h"
#include "core/text/tokenizer.h"
#include "core/text/unicode.h"

namespace hp::core {
namespace text {
namespace {

// tokenizers' DEFAULT_CACHE_CAPACITY: words past it are merged every time (the cache only saves time).
constexpr size_t kCacheCapacity = 10000;
constexpr int64_t kMaxTokenId = 10'000'000;

enum class CharClass { kLetter, kNumber, kSpace, kOther };

CharClass char_class(int32_t c) {
  if ((c >= 0x09 && c <= 0x0D) || c == 0x85) return CharClass::kSpace;
  switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: return CharClass::kLetter;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO: return CharClass::kNumber;
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: return CharClass::kSpace;
    default: return CharClass::kOther;
  }
}

// End (exclusive, in code points) of the regex's match at i: its alternatives in order.
size_t match_end(const std::vector<int32_t>& cps, const std::vector<CharClass>& cls, size_t i) {
  const size_t n = cps.size();
  // 's|'t|'re|'ve|'m|'ll|'d (ASCII apostrophe, lower case only)
  if (cps[i] == '\'' && i + 1 < n) {
    const int32_t c1 = cps[i + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
    if (i + 2 < n) {
      const int32_t c2 = cps[i + 2];
      if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return i + 3;
    }
  }
  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional U+0020, then a run of one class.
  const size_t start = (cps[i] == ' ' && i + 1 < n && cls[i + 1] != CharClass::kSpace) ? i + 1 : i;
  if (cls[start] != CharClass::kSpace) {
    size_t j = start + 1;
    while (j < n && cls[j] == cls[start]) ++j;
    return j;
  }
  // `\s+(?!\S)`: the whitespace run, less its last char when a non-space follows; else `\s+`.
  size_t j = i + 1;
  while (j < n && cls[j] == CharClass::kSpace) ++j;
  return (j < n && j - i >= 2) ? j - 1 : j;
}

// One symbol of a word being merged (tokenizers' Symbol): a vocab id, its neighbours, its byte count.
struct Symbol {
  int32_t id;
  int prev;
  int next;
  size_t len;  // 0 once merged into its left neighbour
};

struct Merge {
  int pos;
  int32_t rank;
  int32_t new_id;
  // The queue's top: lowest rank, then leftmost position (tokenizers' Ord for Merge).
  bool operator<(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

class BpeModel : public TokenModel {
 public:
  // byte_ids[b]: the vocab id of bytes_to_unicode(b), -1 when the vocab lacks it (that byte is then dropped,
  // as in RobertaTokenizerFast, whose BPE has no unk token). merges: pair_key -> (rank, merged id).
  BpeModel(std::array<int32_t, 256> byte_ids, std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges,
           bool add_prefix_space)
      : byte_ids_(byte_ids), merges_(std::move(merges)), add_prefix_space_(add_prefix_space) {}
  void encode(std::string_view text, std::vector<int32_t>& ids) const override;

 private:
  // The ids of one pre-tokenized word: its bytes as symbols, merged as Word::merge_all does.
  std::vector<int32_t> merge_word(std::string_view word) const;

  std::array<int32_t, 256> byte_ids_;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  bool add_prefix_space_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

std::vector<int32_t> BpeModel::merge_word(std::string_view word) const {
  std::vector<Symbol> syms;
  syms.reserve(word.size());
  for (unsigned char b : word) {
    if (byte_ids_[b] < 0) continue;
    const int k = static_cast<int>(syms.size());
    syms.push_back({byte_ids_[b], k - 1, k + 1, 1});
  }
  if (syms.empty()) return {};
  syms.back().next = -1;
  std::priority_queue<Merge> queue;
  auto push_pair = [&](int pos) {
    const int next = syms[static_cast<size_t>(pos)].next;
    auto it = merges_.find(pair_key(syms[static_cast<size_t>(pos)].id, syms[static_cast<size_t>(next)].id));
    if (it != merges_.end()) queue.push({pos, it->second.first, it->second.second});
  };
  for (int k = 0; k + 1 < static_cast<int>(syms.size()); ++k) push_pair(k);
  while (!queue.empty()) {
    const Merge top = queue.top();
    queue.pop();
    Symbol& left = syms[static_cast<size_t>(top.pos)];
    if (left.len == 0 || left.next == -1) continue;
    Symbol& right = syms[static_cast<size_t>(left.next)];
    // A stale entry: the pair at pos changed since it was queued.
    auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.second != top.new_id) continue;
    left.id = top.new_id;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (left.next != -1) syms[static_cast<size_t>(left.next)].prev = top.pos;
    if (left.prev != -1) push_pair(left.prev);
    if (left.next != -1) push_pair(top.pos);
  }
  std::vector<int32_t> out;
  for (const Symbol& s : syms) {
    if (s.len != 0) out.push_back(s.id);
  }
  return out;
}

void BpeModel::encode(std::string_view text, std::vector<int32_t>& ids) const {
  std::string prefixed;
  if (add_prefix_space_ && text[0] != ' ') {  // ByteLevel's add_prefix_space: only U+0020 counts
    prefixed = " " + std::string(text);
    text = prefixed;
  }
  for (std::string_view word : byte_level_split(text)) {
    {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      auto it = cache_.find(std::string(word));
      if (it != cache_.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    std::vector<int32_t> word_ids = merge_word(word);
    ids.insert(ids.end(), word_ids.begin(), word_ids.end());
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::move(word_ids));
  }
}

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

// vocab.json: an object of piece -> id. Ids must be integers in 0..kMaxTokenId-1, each named once.
void load_vocab(const std::string& path, Vocab& vocab) {
  std::ifstream in(path, std::ios::binary);
  const std::string fix = "; use the vocab.json saved with the model (tokenizer.save_pretrained)";
  if (!in) throw InputError(path + ": not found or unreadable" + fix);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not valid JSON (" + e.what() + ")" + fix);
  }
  if (!j.is_object()) throw InputError(path + ": expected a JSON object of token -> id, got " + j.type_name() + fix);
  std::vector<char> seen;
  for (const auto& [token, id] : j.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxTokenId)
      throw InputError(path + ": token " + in_quotes(token) + " has id " + id.dump() +
                       ", expected an integer in 0..9999999" + fix);
    const auto k = static_cast<size_t>(id.get<int64_t>());
    if (k >= vocab.id_to_token.size()) {
      vocab.id_to_token.resize(k + 1);
      seen.resize(k + 1, 0);
    }
    if (seen[k])
      throw InputError(path + ": tokens " + in_quotes(vocab.id_to_token[k]) + " and " + in_quotes(token) +
                       " both have id " + std::to_string(k) + fix);
    seen[k] = 1;
    vocab.id_to_token[k] = token;
    vocab.token_to_id[token] = static_cast<int32_t>(k);
  }
}

// merges.txt: "#version" lines skipped, then one "a b" a line, rank = order (tokenizers' BPE::read_file).
// Each of a, b and a+b must be in the vocab (BpeBuilder::build). A repeated merge is refused: the slow
// RobertaTokenizer keeps its first rank and tokenizers' reader its last, so HF itself is of two minds.
std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> load_merges(const std::string& path, const Vocab& vocab,
                                                                      const std::string& vocab_path) {
  std::ifstream in(path, std::ios::binary);
  const std::string fix = "; use the merges.txt saved with the model's vocab.json (tokenizer.save_pretrained)";
  if (!in) throw InputError(path + ": not found or unreadable" + fix);
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;
  std::unordered_map<uint64_t, size_t> line_of;
  std::string line;
  int32_t rank = 0;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("#version", 0) == 0) continue;
    const std::string where = path + ":" + std::to_string(n) + ": ";
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos)
      throw InputError(where + "expected two pieces separated by one space, got " + in_quotes(line) + fix);
    const std::string a = line.substr(0, space);
    const std::string b = line.substr(space + 1);
    for (const std::string& piece : {a, b, a + b}) {
      if (!vocab.find(piece))
        throw InputError(where + "merge " + in_quotes(line) + " names " + in_quotes(piece) + ", which " + vocab_path +
                         " lacks" + fix);
    }
    const uint64_t key = pair_key(*vocab.find(a), *vocab.find(b));
    const auto [it, fresh] = line_of.emplace(key, n);
    if (!fresh)
      throw InputError(where + "merge " + in_quotes(line) + " repeats line " + std::to_string(it->second) +
                       " (Hugging Face's two loaders would rank it differently); remove one of them");
    merges.emplace(key, std::make_pair(rank++, *vocab.find(a + b)));
  }
  return merges;
}

}  // namespace

const std::array<int32_t, 256>& bytes_to_unicode() {
  static const std::array<int32_t, 256> table = [] {
    std::array<int32_t, 256> t{};
    int32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[static_cast<size_t>(b)] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

std::vector<std::string_view> byte_level_split(std::string_view text) {
  std::vector<size_t> offs;
  const std::vector<int32_t> cps = decode_utf8(text, &offs);
  std::vector<CharClass> cls(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) cls[i] = char_class(cps[i]);
  std::vector<std::string_view> out;
  for (size_t i = 0; i < cps.size();) {
    const size_t j = match_end(cps, cls, i);
    out.push_back(text.substr(offs[i], offs[j] - offs[i]));
    i = j;
  }
  return out;
}

}  // namespace text

Tokenizer Tokenizer::from_bpe_files(const std::string& vocab_json, const std::string& merges_txt,
                                    const TokenizerOptions& options, const std::vector<AddedToken>& added) {
  auto vocab = std::make_shared<text::Vocab>();
  text::load_vocab(vocab_json, *vocab);
  auto merges = text::load_merges(merges_txt, *vocab, vocab_json);
  std::array<int32_t, 256> byte_ids{};
  for (size_t b = 0; b < 256; ++b) {
    std::string piece;
    text::append_utf8(text::bytes_to_unicode()[b], piece);
    const int32_t* id = vocab->find(piece);
    byte_ids[b] = id ? *id : -1;
  }
  Tokenizer tok;
  tok.kind_ = TokenizerKind::kByteLevelBpe;
  tok.options_ = options;
  tok.set_specials(added, *vocab, vocab_json);
  tok.model_ = std::make_shared<text::BpeModel>(byte_ids, std::move(merges), options.add_prefix_space);
  tok.vocab_ = std::move(vocab);
  return tok;
}

}  // namespace hp::core
