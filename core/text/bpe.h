// Byte-level BPE (GPT-2, RoBERTa) pieces exposed for tests; the tokenizer itself is Tokenizer::from_bpe_files
// (core/text/tokenizer.h). Mirrors tokenizers 0.19: ByteLevel pre-tokenizer (add_prefix_space as configured,
// use_regex=true) and the BPE model without dropout, unk token or subword prefixes (RobertaTokenizerFast).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace hp::core::text {

// GPT-2's bytes_to_unicode (openai/gpt-2 encoder.py): printable Latin-1 bytes map to themselves, the other
// 68 bytes in order to U+0100.. (so ' ' -> U+0120 'Ġ', '\n' -> U+010A 'Ċ'). vocab.json's pieces are in these.
const std::array<int32_t, 256>& bytes_to_unicode();

// The pre-tokenizer's split of raw text by GPT-2's regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (Oniguruma's \s: U+0009..U+000D, U+0085, Zs, Zl, Zp), as views into `text`; together they cover it.
std::vector<std::string_view> byte_level_split(std::string_view text);

}  // namespace hp::core::text
