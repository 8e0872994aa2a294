// Code-point helpers shared by the tokenizers of core/text (torch-free; utf8proc's Unicode tables).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hp::core::text {

// UTF-8 -> code points; an invalid byte becomes U+FFFD (one byte long). `offsets`, when given, receives the
// byte offset of each code point plus, last, the text's length: [n + 1].
std::vector<int32_t> decode_utf8(std::string_view s, std::vector<size_t>* offsets = nullptr);
void append_utf8(int32_t c, std::string& out);

// Rust's char::is_whitespace (the Unicode White_Space property), which Hugging Face tokenizers uses.
bool is_rust_whitespace(int32_t c);
// Python's str.isspace: White_Space plus U+001C..U+001F (bidi class B or S), which the slow
// (Python) tokenizers use when they strip text beside an lstrip/rstrip special token.
bool is_python_space(int32_t c);

// Python's str.lower(): each code point's Unicode lowercase (utf8proc), U+0130 as "i" U+0307 as Python writes it.
std::string python_lower(std::string_view s);

// Byte length of the whitespace that ends (or starts) `s`, by the predicate given.
size_t trailing_space_bytes(std::string_view s, bool (*is_space)(int32_t));
size_t leading_space_bytes(std::string_view s, bool (*is_space)(int32_t));

}  // namespace hp::core::text
