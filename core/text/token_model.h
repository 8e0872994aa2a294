// Inside core/text: the vocabulary table and the interface every tokenizer backend implements
// (WordPiece, byte-level BPE, SentencePiece). Callers use core/text/tokenizer.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hp::core::text {

// Ids run 0..id_to_token.size()-1; an id no token names (a gap in vocab.json) maps to "".
struct Vocab {
  std::unordered_map<std::string, int32_t> token_to_id;
  std::vector<std::string> id_to_token;

  const int32_t* find(const std::string& token) const {
    auto it = token_to_id.find(token);
    return it == token_to_id.end() ? nullptr : &it->second;
  }
};

// One backend: the steps between the split on added tokens and the ids (normalizer, pre-tokenizer, model).
class TokenModel {
 public:
  virtual ~TokenModel() = default;
  // Appends the ids of `text` (non-empty, no added token in it).
  virtual void encode(std::string_view text, std::vector<int32_t>& ids) const = 0;
};

}  // namespace hp::core::text
