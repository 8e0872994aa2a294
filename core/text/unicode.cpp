// Code-point helpers: UTF-8 decoding and the two whitespace definitions (Rust's, Python's).
#include "core/text/unicode.h"

#include <utf8proc.h>

namespace hp::core::text {

std::vector<int32_t> decode_utf8(std::string_view s, std::vector<size_t>* offsets) {
  std::vector<int32_t> out;
  out.reserve(s.size());
  if (offsets) {
    offsets->clear();
    offsets->reserve(s.size() + 1);
  }
  const auto* begin = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  size_t pos = 0;
  while (pos < s.size()) {
    utf8proc_int32_t c = 0;
    utf8proc_ssize_t n = utf8proc_iterate(begin + pos, static_cast<utf8proc_ssize_t>(s.size() - pos), &c);
    if (n <= 0) {
      c = 0xFFFD;
      n = 1;
    }
    out.push_back(c);
    if (offsets) offsets->push_back(pos);
    pos += static_cast<size_t>(n);
  }
  if (offsets) offsets->push_back(s.size());
  return out;
}

void append_utf8(int32_t c, std::string& out) {
  utf8proc_uint8_t buf[4];
  utf8proc_ssize_t n = utf8proc_encode_char(c, buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

bool is_rust_whitespace(int32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_python_space(int32_t c) { return (c >= 0x1C && c <= 0x1F) || is_rust_whitespace(c); }

size_t trailing_space_bytes(std::string_view s, bool (*is_space)(int32_t)) {
  std::vector<size_t> offs;
  const auto cps = decode_utf8(s, &offs);
  size_t i = cps.size();
  while (i > 0 && is_space(cps[i - 1])) --i;
  return s.size() - offs[i];
}

size_t leading_space_bytes(std::string_view s, bool (*is_space)(int32_t)) {
  std::vector<size_t> offs;
  const auto cps = decode_utf8(s, &offs);
  size_t i = 0;
  while (i < cps.size() && is_space(cps[i])) ++i;
  return offs[i];
}

std::string python_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (int32_t c : decode_utf8(s)) {
    if (c == 0x130) {  // İ: Python's full lowercase mapping gives two code points
      append_utf8('i', out);
      append_utf8(0x307, out);
    } else {
      append_utf8(utf8proc_tolower(c), out);
    }
  }
  return out;
}

}  // namespace hp::core::text
