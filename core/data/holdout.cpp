// Held-out rows that share no text with the rows left to train on (see core/data/holdout.h).
#include "core/data/holdout.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace hp::core {

namespace {

constexpr std::size_t kMaxSpan = 64;  // words: containment is looked for among spans up to this long

using Key = std::uint64_t;

// Words by ASCII white space, so "a  b " and "a b" are the same text.
std::vector<std::string_view> words(const std::string& s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    const std::size_t b = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i > b) out.emplace_back(s.data() + b, i - b);
  }
  return out;
}

// Each row as word ids, the same id for the same word anywhere in the split.
std::vector<std::vector<std::uint32_t>> word_ids(const std::vector<Example>& rows) {
  std::unordered_map<std::string_view, std::uint32_t> ids;
  std::vector<std::vector<std::uint32_t>> out(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::string_view w : words(rows[r].text_a))
      out[r].push_back(ids.emplace(w, static_cast<std::uint32_t>(ids.size() + 1)).first->second);
  return out;
}

// Calls f(key, length) for every span of up to kMaxSpan words (the whole row only when it is within that).
template <class F>
void for_each_span(const std::vector<std::uint32_t>& w, F&& f) {
  for (std::size_t i = 0; i < w.size(); ++i) {
    Key h = 0;
    for (std::size_t j = i; j < w.size() && j - i < kMaxSpan; ++j) {
      h = h * 0x100000001b3ULL + w[j];
      f(h ^ ((j - i + 1) * 0x9e3779b97f4a7c15ULL), j - i + 1);
    }
  }
}

Key whole_key(const std::vector<std::uint32_t>& w) {
  Key h = 0;
  for (std::uint32_t x : w) h = h * 0x100000001b3ULL + x;
  return h ^ (w.size() * 0x9e3779b97f4a7c15ULL);
}

// One-text rows: whole rows are those no other row contains; the rest loses rows inside a held row or holding one.
Holdout hold_out_texts(const std::vector<Example>& rows, std::size_t n) {
  const auto ids = word_ids(rows);
  std::vector<Key> full(rows.size());
  std::unordered_set<Key> fulls;
  for (std::size_t r = 0; r < rows.size(); ++r) fulls.insert(full[r] = whole_key(ids[r]));
  std::unordered_set<Key> parts;  // whole rows' texts found as a proper part of another row
  for (const auto& w : ids)
    for_each_span(w, [&](Key k, std::size_t len) {
      if (len < w.size() && fulls.count(k)) parts.insert(k);
    });
  Holdout h;
  for (std::size_t r = rows.size(); r-- > 0 && h.held.size() < n;)
    if (!ids[r].empty() && !parts.count(full[r])) h.held.push_back(r);
  std::reverse(h.held.begin(), h.held.end());
  std::unordered_set<Key> held_spans, held_full;
  for (std::size_t r : h.held) {
    held_full.insert(full[r]);
    held_spans.insert(full[r]);  // a copy of a row over kMaxSpan words
    for_each_span(ids[r], [&](Key k, std::size_t) { held_spans.insert(k); });
  }
  std::vector<bool> is_held(rows.size(), false);
  for (std::size_t r : h.held) is_held[r] = true;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (is_held[r]) continue;
    bool shares = held_spans.count(full[r]) > 0;
    if (!shares) for_each_span(ids[r], [&](Key k, std::size_t) { shares = shares || held_full.count(k) > 0; });
    if (shares) ++h.dropped;
    else h.rest.push_back(r);
  }
  return h;
}

std::string normalized(const std::string& s) {
  std::string out;
  for (std::string_view w : words(s)) (out.empty() ? out : out += ' ') += w;
  return out;
}

// Pair rows: all rows are whole; the rest loses rows that share either sentence with a held row.
Holdout hold_out_pairs(const std::vector<Example>& rows, std::size_t n) {
  Holdout h;
  const std::size_t first = rows.size() - std::min(n, rows.size());
  std::unordered_set<std::string> held;
  for (std::size_t r = first; r < rows.size(); ++r) {
    h.held.push_back(r);
    held.insert(normalized(rows[r].text_a));
    held.insert(normalized(rows[r].text_b));
  }
  for (std::size_t r = 0; r < first; ++r) {
    if (held.count(normalized(rows[r].text_a)) || held.count(normalized(rows[r].text_b))) ++h.dropped;
    else h.rest.push_back(r);
  }
  return h;
}

}  // namespace

Holdout hold_out(const std::vector<Example>& rows, std::size_t n) {
  const bool pairs = std::any_of(rows.begin(), rows.end(), [](const Example& e) { return !e.text_b.empty(); });
  return pairs ? hold_out_pairs(rows, n) : hold_out_texts(rows, n);
}

}  // namespace hp::core
