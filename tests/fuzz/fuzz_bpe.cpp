// vocab.json and merges.txt (the input cut at its first NUL byte: vocab.json before, merges.txt after), then
// byte-level BPE on a fixed pair and on the merges text itself as input.
#include <algorithm>
#include <string>

#include "core/text/tokenizer.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t cut = std::min(input.find('\0'), size);
  const size_t rest = std::min(cut + 1, size);
  const auto vocab = hp::fuzz::as_file(data, cut, "vocab.json");
  const auto merges = hp::fuzz::as_file(data + rest, size - rest, "merges.txt");
  hp::fuzz::expect_clean([&] {
    const auto tok = hp::core::Tokenizer::from_bpe_files(vocab, merges);
    const std::string text = input.substr(rest, 512);
    const std::string b = "the movie was great, wasn't it?";
    tok.encode(text, &b, 64);
    tok.encode("H\xC3\xA9llo  w\xC3\xB6rld <mask> \xE6\x9D\xB1\xE4\xBA\xAC</s>\n\n", nullptr, 16);
  });
  return 0;
}
