// Tokenizers of the encoders headprune prunes, token-for-token identical to Hugging Face:
//   kWordPiece      BERT: BertTokenizerFast (BertNormalizer + BertPreTokenizer + WordPiece), core/text/wordpiece.cpp
//   kByteLevelBpe   RoBERTa: RobertaTokenizerFast (ByteLevel pre-tokenizer + BPE), core/text/bpe.cpp
//   kSentencePiece  XLM-R: XLMRobertaTokenizer (the SentencePiece library + fairseq ids; pair truncation as
//                   XLMRobertaTokenizerFast), core/text/sentencepiece_model.cpp
// One type, `Tokenizer`; from_model_dir picks the backend by the files in the folder. Torch-free. Parity with
// HF is tested on all GLUE/MNLI/UD text in tests/core/tokenizer_test.cpp and tokenizer_bpe_test.cpp; the
// reference ids come from tools/tokenizer_reference.py. GLUE file readers: see core/data/glue.h.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hp::core {

enum class TokenizerKind { kWordPiece, kByteLevelBpe, kSentencePiece };

// Fields of HF's tokenizer_config.json that change the output ids.
struct TokenizerOptions {
  bool lower_case = true;  // do_lower_case (WordPiece)
  std::optional<bool> strip_accents;  // strip_accents (WordPiece); unset (null) follows lower_case, as in HF
  bool tokenize_chinese_chars = true;  // tokenize_chinese_chars (WordPiece): CJK ideographs become single words
  bool add_prefix_space = false;  // add_prefix_space (byte-level BPE): a space before text that starts without one
  // sentence-transformers' do_lower_case (sentence_bert_config.json): Python's str.lower() of the text before
  // anything else, added tokens included, as its Transformer module lowers each text before the tokenizer sees it.
  bool lowercase_input = false;
};

// One encoded input, specials included: [CLS] a [SEP] (b [SEP]) for WordPiece, <s> a </s> (</s> b </s>) else.
struct Encoding {
  std::vector<int32_t> ids;  // [S]
  std::vector<int32_t> type_ids;  // [S]: WordPiece 0 for [CLS] a [SEP], 1 for b [SEP]; all 0 for the others
};

// Lengths (kept_a, kept_b) that HF's "longest_first" truncation keeps of a pair whose
// pieces number n_a and n_b, given `budget` = max_seq_len minus the specials (3 BERT, 4 RoBERTa/XLM-R).
// tokenizers' rule (not the slow tokenizer's): if both exceed budget/2, the shorter input
// (input a on a tie) keeps floor(budget/2) and the other keeps the rest.
std::pair<size_t, size_t> longest_first_lengths(size_t n_a, size_t n_b, size_t budget);

namespace text {
class TokenModel;
struct Vocab;
}  // namespace text

// An HF added token matched verbatim in raw text before any other step; lstrip/rstrip absorb the whitespace
// beside it (RoBERTa's and XLM-R's <mask> has lstrip).
struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool lstrip = false;
  bool rstrip = false;
};

class Tokenizer {
 public:
  // WordPiece. vocab_txt: one token per line, id = line index. Throws InputError when the file is
  // missing or lacks [PAD], [UNK], [CLS] or [SEP].
  static Tokenizer from_files(const std::string& vocab_txt, const TokenizerOptions& options = {});
  // Byte-level BPE from HF's vocab.json (token -> id) and merges.txt (one "a b" merge a line, rank = order).
  // `added`: the added tokens of tokenizer_config.json's added_tokens_decoder; empty means RoBERTa's
  // <s> <pad> </s> <unk> <mask> (lstrip) at their vocab.json ids. Throws InputError naming the file and line.
  static Tokenizer from_bpe_files(const std::string& vocab_json, const std::string& merges_txt,
                                  const TokenizerOptions& options = {}, const std::vector<AddedToken>& added = {});
  // SentencePiece with XLM-R's fairseq ids: <s>=0 <pad>=1 </s>=2 <unk>=3, model piece k>0 -> k+1,
  // <mask> = pieces+1. `added` as for from_bpe_files. Throws InputError when the model cannot be read.
  static Tokenizer from_sentencepiece(const std::string& model_file, const std::vector<AddedToken>& added = {});
  // By the files in `dir`: vocab.txt (WordPiece), vocab.json + merges.txt (byte-level BPE) or
  // sentencepiece.bpe.model (SentencePiece), plus dir/tokenizer_config.json when present.
  static Tokenizer from_model_dir(const std::string& dir);
  // Options from an HF tokenizer_config.json; absent keys keep their defaults.
  static TokenizerOptions read_options(const std::string& tokenizer_config_json);
  // The added_tokens_decoder of an HF tokenizer_config.json (empty when it has none).
  static std::vector<AddedToken> read_added_tokens(const std::string& tokenizer_config_json);

  // Pieces of `text` without the specials of encode(); a literal special ("[SEP]", "<mask>") stays one token.
  std::vector<std::string> tokenize(const std::string& text) const;
  // Ids of tokenize(text).
  std::vector<int32_t> tokenize_ids(const std::string& text) const;
  // With specials (see Encoding); b may be nullptr. max_seq_len counts the specials; 0 disables
  // truncation, otherwise longest_first truncation as HF (single inputs keep a prefix).
  // Throws ConfigError when max_seq_len < 0 or too small to hold the specials.
  Encoding encode(const std::string& a, const std::string* b, int max_seq_len) const;

  // Id of an exact vocab entry (or added token), or nullopt.
  std::optional<int32_t> find(const std::string& token) const;
  // Vocab entry of `id`; throws InputError when out of range.
  const std::string& token(int32_t id) const;
  size_t vocab_size() const;  // ids run 0..vocab_size()-1
  TokenizerKind kind() const { return kind_; }
  int32_t cls_id() const { return cls_id_; }
  int32_t sep_id() const { return sep_id_; }
  int32_t pad_id() const { return pad_id_; }
  int32_t unk_id() const { return unk_id_; }
  // [MASK] or <mask>; -1 when the vocab has none.
  int32_t mask_id() const { return mask_id_; }
  const TokenizerOptions& options() const { return options_; }
  void set_lowercase_input(bool on) { options_.lowercase_input = on; }

 private:
  Tokenizer() = default;
  // Sets the added tokens (matched in raw text), adds those outside `vocab` to it, and finds the specials
  // [CLS]/<s>, [SEP]/</s>, [PAD]/<pad>, [UNK]/<unk> (required; `where` names the file in the error) and the mask.
  void set_specials(const std::vector<AddedToken>& added, text::Vocab& vocab, const std::string& where);
  // Appends the ids of text that holds no added token.
  void tokenize_plain(const std::string& text, std::vector<int32_t>& ids) const;

  TokenizerKind kind_ = TokenizerKind::kWordPiece;
  TokenizerOptions options_;
  std::shared_ptr<const text::Vocab> vocab_;
  std::shared_ptr<const text::TokenModel> model_;
  std::vector<AddedToken> specials_;
  std::array<bool, 256> special_first_{};  // first bytes of specials_: the quick test at each position
  bool (*strip_space_)(int32_t) = nullptr;  // whitespace that lstrip/rstrip absorb (Rust's or Python's)
  int32_t cls_id_ = -1;
  int32_t sep_id_ = -1;
  int32_t pad_id_ = -1;
  int32_t unk_id_ = -1;
  int32_t mask_id_ = -1;
};

}  // namespace hp::core
