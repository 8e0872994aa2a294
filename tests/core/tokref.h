// Comparing a tokenizer with the Hugging Face reference that tools/tokenizer_reference.py wrote (DIR/manifest.json
// and one JSON line per input: src, a, b, the full ids, the kept lengths per max_seq_len): every input untruncated
// and at every recorded max_seq_len. Shared by the WordPiece, BPE and SentencePiece parity tests.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "core/text/tokenizer.h"

namespace hp::test {

inline std::string join_ids(const std::vector<int32_t>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? " " : "") << v[i];
  return os.str();
}

struct ParityResult {
  size_t rows = 0, encodings = 0, mismatches = 0;
  std::string first;  // the first mismatch, described
};

// `want(record, max_len)`: HF's encoding of the record at max_len (0 = untruncated) as the reference gives it.
inline ParityResult compare_with_reference(
    const core::Tokenizer& tok, const std::string& dir, const nlohmann::json& manifest,
    const std::function<core::Encoding(const nlohmann::json&, int)>& want) {
  ParityResult r;
  for (const auto& [name, count] : manifest.at("files").items()) {
    std::ifstream in(dir + "/" + name);
    REQUIRE(in.good());
    std::string line;
    size_t file_rows = 0;
    while (std::getline(in, line)) {
      const auto rec = nlohmann::json::parse(line);
      ++file_rows;
      const std::string a = rec.at("a").get<std::string>();
      const bool pair = !rec.at("b").is_null();
      const std::string b = pair ? rec.at("b").get<std::string>() : std::string();
      auto compare = [&](int max_len) {
        const core::Encoding expected = want(rec, max_len), got = tok.encode(a, pair ? &b : nullptr, max_len);
        ++r.encodings;
        if (got.ids == expected.ids && got.type_ids == expected.type_ids) return;
        if (r.mismatches++ == 0)
          r.first = rec.at("src").get<std::string>() + " max_seq_len=" + std::to_string(max_len) + "\n  a: " + a +
                    "\n  b: " + (pair ? b : "(none)") + "\n  hf ids:   " + join_ids(expected.ids) +
                    "\n  ours ids: " + join_ids(got.ids) + "\n  hf types:   " + join_ids(expected.type_ids) +
                    "\n  ours types: " + join_ids(got.type_ids);
      };
      compare(0);
      for (const auto& [max_len, keep] : rec.at("keep").items()) compare(std::stoi(max_len));
    }
    CHECK(file_rows == count.get<size_t>());
    r.rows += file_rows;
  }
  return r;
}

}  // namespace hp::test
