// The tokenizer's common steps: choosing the backend by the files of a model folder, the split on added
// tokens (HF's AddedVocabulary / the slow tokenizers' trie, with lstrip and rstrip), the specials' layout
// and longest_first truncation. The backends are in wordpiece.cpp, bpe.cpp and sentencepiece_model.cpp.
#include "core/text/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/base/errors.h"  // InputError, ConfigError
#include "core/text/token_model.h"
#include "core/text/unicode.h"

namespace hp::core {
namespace {

bool file_exists(const std::string& path) {
  std::ifstream f(path);
  return f.good();
}

nlohmann::json read_json_file(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": " + what + " not found or unreadable; check the model folder");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not valid JSON (" + e.what() + "); fix or remove the file");
  }
  return j;
}

// The names of the specials of each kind: cls, sep, pad, unk, mask.
struct SpecialNames {
  const char* cls;
  const char* sep;
  const char* pad;
  const char* unk;
  const char* mask;
};
constexpr SpecialNames kBertNames{"[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"};
constexpr SpecialNames kRobertaNames{"<s>", "</s>", "<pad>", "<unk>", "<mask>"};

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

TokenizerOptions Tokenizer::read_options(const std::string& path) {
  const nlohmann::json j = read_json_file(path, "tokenizer config");
  TokenizerOptions opt;
  auto read_bool = [&](const char* key, bool& dst) {
    if (!j.is_object() || !j.contains(key) || j[key].is_null()) return;
    if (!j[key].is_boolean()) {
      throw InputError(path + ": " + key + " = " + j[key].dump() + ", expected true or false; " + "fix the value");
    }
    dst = j[key].get<bool>();
  };
  read_bool("do_lower_case", opt.lower_case);
  read_bool("tokenize_chinese_chars", opt.tokenize_chinese_chars);
  read_bool("add_prefix_space", opt.add_prefix_space);
  if (j.is_object() && j.contains("strip_accents") && !j["strip_accents"].is_null()) {
    bool strip = false;
    read_bool("strip_accents", strip);
    opt.strip_accents = strip;
  }
  return opt;
}

std::vector<AddedToken> Tokenizer::read_added_tokens(const std::string& path) {
  const nlohmann::json j = read_json_file(path, "tokenizer config");
  std::vector<AddedToken> out;
  if (!j.is_object() || !j.contains("added_tokens_decoder")) return out;
  const auto& dec = j["added_tokens_decoder"];
  auto bad = [&](const std::string& key, const std::string& what) {
    return InputError(path + ": added_tokens_decoder[\"" + key + "\"] " + what +
                      "; fix the entry or save the tokenizer again with save_pretrained");
  };
  if (!dec.is_object()) throw InputError(path + ": added_tokens_decoder is not an object; fix or remove it");
  for (const auto& item : dec.items()) {
    const std::string key = item.key();  // not a structured binding: the lambdas below capture it
    const nlohmann::json& entry = item.value();
    AddedToken t;
    // Ids past 9999999 are refused, as in vocab.json: the tables are sized by the ids.
    const bool digits = !key.empty() && key.size() <= 7 && key.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) throw bad(key, "is not a token id in 0..9999999");
    t.id = static_cast<int32_t>(std::stol(key));
    if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string() ||
        entry["content"].get<std::string>().empty())
      throw bad(key, "has no \"content\" string");
    t.content = entry["content"].get<std::string>();
    auto flag = [&](const char* name) {
      if (!entry.contains(name) || entry[name].is_null()) return false;
      if (!entry[name].is_boolean()) throw bad(key, std::string(name) + " is not true or false");
      return entry[name].get<bool>();
    };
    t.lstrip = flag("lstrip");
    t.rstrip = flag("rstrip");
    if (flag("single_word")) throw bad(key, "(" + t.content + ") has single_word, which headprune does not implement");
    out.push_back(std::move(t));
  }
  return out;
}

Tokenizer Tokenizer::from_model_dir(const std::string& dir) {
  const std::string config = dir + "/tokenizer_config.json";
  const bool has_config = file_exists(config);
  auto has = [&](const char* name) { return file_exists(dir + "/" + name); };
  Tokenizer tok;
  std::string vocab_file;
  if (has("vocab.txt")) {
    vocab_file = dir + "/vocab.txt";
    tok = from_files(vocab_file, has_config ? read_options(config) : TokenizerOptions{});
  } else if (has("vocab.json") || has("merges.txt")) {
    for (const char* name : {"vocab.json", "merges.txt"}) {
      if (!has(name))
        throw InputError(dir + "/" + name + ": not found, and a byte-level BPE tokenizer (RoBERTa) needs both " +
                         "vocab.json and merges.txt; save the tokenizer into the folder with save_pretrained");
    }
    vocab_file = dir + "/vocab.json";
    tok = from_bpe_files(vocab_file, dir + "/merges.txt", has_config ? read_options(config) : TokenizerOptions{},
                         has_config ? read_added_tokens(config) : std::vector<AddedToken>{});
  } else if (has("sentencepiece.bpe.model")) {
    vocab_file = dir + "/sentencepiece.bpe.model";
    tok = from_sentencepiece(vocab_file, has_config ? read_added_tokens(config) : std::vector<AddedToken>{});
  } else {
    throw InputError(dir + ": no tokenizer files (looked for vocab.txt, vocab.json + merges.txt, " +
                     "sentencepiece.bpe.model); save the model's tokenizer into the folder with save_pretrained");
  }
  // A token id at or past the model's vocab_size has no embedding row: refuse here, by name, rather than
  // as an index error in the middle of a forward (a malformed config.json is the model loader's to report).
  std::ifstream model_config(dir + "/config.json");
  const auto j = nlohmann::json::parse(model_config, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("vocab_size") && j["vocab_size"].is_number_integer()) {
    const auto vocab_size = j["vocab_size"].get<int64_t>();
    if (static_cast<int64_t>(tok.vocab_size()) > vocab_size)
      throw InputError(vocab_file + ": " + std::to_string(tok.vocab_size()) +
                       " tokens, more than config.json's vocab_size " + std::to_string(vocab_size) + " (ids from " +
                       std::to_string(vocab_size) + " up have no embedding); use the " +
                       vocab_file.substr(dir.size() + 1) + " that belongs to this model");
  }
  return tok;
}

void Tokenizer::set_specials(const std::vector<AddedToken>& added, text::Vocab& vocab, const std::string& where) {
  const bool bert = kind_ == TokenizerKind::kWordPiece;
  const SpecialNames& names = bert ? kBertNames : kRobertaNames;
  specials_.clear();
  if (bert || added.empty()) {
    // WordPiece: the five BERT specials (normalized=false in HF); the others: RoBERTa's and XLM-R's, <mask> lstrip.
    for (const char* name : {names.pad, names.unk, names.cls, names.sep, names.mask}) {
      if (const int32_t* id = vocab.find(name)) specials_.push_back({name, *id, !bert && name == names.mask, false});
    }
  } else {
    // tokenizer_config.json's added tokens win over vocab entries of the same text or id, as in HF.
    for (const AddedToken& t : added) {
      const auto id = static_cast<size_t>(t.id);
      if (id >= vocab.id_to_token.size()) vocab.id_to_token.resize(id + 1);
      vocab.id_to_token[id] = t.content;
      vocab.token_to_id[t.content] = t.id;
      specials_.push_back(t);
    }
  }
  for (const char* name : {names.cls, names.sep, names.unk, names.pad}) {
    if (!vocab.find(name)) {
      // Entries: vocab.txt's lines; vocab.json's tokens.
      const size_t entries = bert ? vocab.id_to_token.size() : vocab.token_to_id.size();
      throw InputError(where + ": vocab has no " + name + " token (" + std::to_string(entries) +
                       " entries read); use a " +
                       (bert ? "BERT vocab.txt that lists [PAD], [UNK], [CLS], [SEP]"
                             : "RoBERTa vocab.json that lists <s>, <pad>, </s>, <unk>"));
    }
  }
  cls_id_ = *vocab.find(names.cls);
  sep_id_ = *vocab.find(names.sep);
  unk_id_ = *vocab.find(names.unk);
  pad_id_ = *vocab.find(names.pad);
  special_first_.fill(false);
  for (const auto& sp : specials_) special_first_[static_cast<unsigned char>(sp.content[0])] = true;
  const int32_t* mask = vocab.find(names.mask);
  mask_id_ = mask ? *mask : -1;
  // Python's slow tokenizers (the SentencePiece path follows XLMRobertaTokenizer) strip with str.isspace.
  strip_space_ = kind_ == TokenizerKind::kSentencePiece ? text::is_python_space : text::is_rust_whitespace;
}

std::optional<int32_t> Tokenizer::find(const std::string& token) const {
  const int32_t* id = vocab_->find(token);
  if (!id) return std::nullopt;
  return *id;
}

const std::string& Tokenizer::token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_->id_to_token.size()) {
    throw InputError("tokenizer: token id " + std::to_string(id) + " outside the vocab of " +
                     std::to_string(vocab_->id_to_token.size()) + "; use ids from this vocab");
  }
  return vocab_->id_to_token[static_cast<size_t>(id)];
}

size_t Tokenizer::vocab_size() const { return vocab_->id_to_token.size(); }

void Tokenizer::tokenize_plain(const std::string& text, std::vector<int32_t>& ids) const {
  if (!text.empty()) model_->encode(text, ids);
}

std::vector<int32_t> Tokenizer::tokenize_ids(const std::string& raw) const {
  const std::string text = options_.lowercase_input ? text::python_lower(raw) : raw;
  std::vector<int32_t> ids;
  // Split out added tokens first, leftmost-longest, before any normalization (HF added tokens with
  // normalized=false): "x[SEP]y" gives x, [SEP], y.
  size_t plain_from = 0;
  for (size_t pos = 0; pos < text.size();) {
    const AddedToken* best = nullptr;
    if (special_first_[static_cast<unsigned char>(text[pos])]) {
      for (const auto& sp : specials_) {
        if (text.compare(pos, sp.content.size(), sp.content) == 0 &&
            (!best || sp.content.size() > best->content.size())) {
          best = &sp;
        }
      }
    }
    if (!best) {
      ++pos;
      continue;
    }
    std::string_view plain(text.data() + plain_from, pos - plain_from);
    if (best->lstrip) plain.remove_suffix(text::trailing_space_bytes(plain, strip_space_));
    tokenize_plain(std::string(plain), ids);
    ids.push_back(best->id);
    pos += best->content.size();
    if (best->rstrip) pos += text::leading_space_bytes(std::string_view(text).substr(pos), strip_space_);
    plain_from = pos;
  }
  tokenize_plain(text.substr(plain_from), ids);
  return ids;
}

std::vector<std::string> Tokenizer::tokenize(const std::string& text) const {
  std::vector<std::string> out;
  for (int32_t id : tokenize_ids(text)) out.push_back(token(id));
  return out;
}

Encoding Tokenizer::encode(const std::string& a, const std::string* b, int max_seq_len) const {
  // BERT: [CLS] a [SEP] b [SEP], type ids 0 then 1. RoBERTa, XLM-R: <s> a </s></s> b </s>, one token type.
  const bool bert = kind_ == TokenizerKind::kWordPiece;
  const size_t n_specials = b ? (bert ? 3 : 4) : 2;
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
    if (!bert) enc.ids.push_back(sep_id_);
    enc.ids.insert(enc.ids.end(), ids_b.begin(), ids_b.end());
    enc.ids.push_back(sep_id_);
    enc.type_ids.resize(enc.ids.size(), bert ? 1 : 0);
  }
  return enc;
}

}  // namespace hp::core
