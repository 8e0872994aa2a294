// BERT WordPiece tokenizer, token-for-token identical to Hugging Face BertTokenizerFast
// (tokenizers 0.19: BertNormalizer + BertPreTokenizer + WordPiece + TemplateProcessing).
// Torch-free. Parity with HF is tested on all GLUE/MNLI/UD text in tests/core/tokenizer_test.cpp;
// the reference ids come from tools/tokenizer_reference.py. GLUE file readers: see core/data/glue.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hp::core {

// Fields of HF's tokenizer_config.json that change the output ids.
struct TokenizerOptions {
  bool lower_case = true;  // do_lower_case
  std::optional<bool> strip_accents;  // strip_accents; unset (null) follows lower_case, as in HF
  bool tokenize_chinese_chars = true;  // tokenize_chinese_chars: CJK ideographs become single words
};

// One encoded input, specials included: [CLS] a [SEP] or [CLS] a [SEP] b [SEP].
struct Encoding {
  std::vector<int32_t> ids;  // [S]
  std::vector<int32_t> type_ids;  // [S]: 0 for [CLS] a [SEP], 1 for b [SEP]
};

// Lengths (kept_a, kept_b) that HF's "longest_first" truncation keeps of a pair whose
// word pieces number n_a and n_b, given `budget` = max_seq_len minus the 3 specials.
// tokenizers' rule (not the slow tokenizer's): if both exceed budget/2, the shorter input
// (input a on a tie) keeps floor(budget/2) and the other keeps the rest.
std::pair<size_t, size_t> longest_first_lengths(size_t n_a, size_t n_b, size_t budget);

class WordPieceTokenizer {
 public:
  // vocab_txt: one token per line, id = line index. Throws InputError when the file is
  // missing or lacks [PAD], [UNK], [CLS] or [SEP].
  static WordPieceTokenizer from_files(const std::string& vocab_txt, const TokenizerOptions& options = {});
  // dir/vocab.txt plus dir/tokenizer_config.json when present (defaults otherwise).
  static WordPieceTokenizer from_model_dir(const std::string& dir);
  // Options from an HF tokenizer_config.json; absent keys keep their defaults.
  static TokenizerOptions read_options(const std::string& tokenizer_config_json);

  // Word pieces of `text` without [CLS]/[SEP]; literal "[SEP]" etc. in text stay one token.
  std::vector<std::string> tokenize(const std::string& text) const;
  // Ids of tokenize(text).
  std::vector<int32_t> tokenize_ids(const std::string& text) const;
  // [CLS] a [SEP] (b [SEP]); b may be nullptr. max_seq_len counts the specials; 0 disables
  // truncation, otherwise longest_first truncation as HF (single inputs keep a prefix).
  // Throws ConfigError when max_seq_len < 0 or too small to hold the specials.
  Encoding encode(const std::string& a, const std::string* b, int max_seq_len) const;

  // Id of an exact vocab entry, or nullopt.
  std::optional<int32_t> find(const std::string& token) const;
  // Vocab entry of `id`; throws InputError when out of range.
  const std::string& token(int32_t id) const;
  size_t vocab_size() const { return id_to_token_.size(); }
  int32_t cls_id() const { return cls_id_; }
  int32_t sep_id() const { return sep_id_; }
  int32_t pad_id() const { return pad_id_; }
  int32_t unk_id() const { return unk_id_; }
  const TokenizerOptions& options() const { return options_; }

 private:
  WordPieceTokenizer() = default;
  // Appends the ids of one normalized, pre-tokenized word (greedy longest match first).
  void word_piece(const std::string& word, std::vector<int32_t>& ids) const;
  // Appends the ids of text that holds no special token.
  void tokenize_plain(const std::string& text, std::vector<int32_t>& ids) const;

  TokenizerOptions options_;
  std::unordered_map<std::string, int32_t> token_to_id_;
  std::vector<std::string> id_to_token_;
  // Special tokens present in the vocab, matched verbatim in raw text (HF added tokens).
  std::vector<std::pair<std::string, int32_t>> specials_;
  int32_t cls_id_ = -1;
  int32_t sep_id_ = -1;
  int32_t pad_id_ = -1;
  int32_t unk_id_ = -1;
};

}  // namespace hp::core
