// vocab.txt, then WordPiece on a fixed pair and on the vocab text itself as input.
#include <string>

#include "core/text/tokenizer.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = hp::fuzz::as_file(data, size, "vocab.txt");
  hp::fuzz::expect_clean([&] {
    const auto tok = hp::core::Tokenizer::from_files(path, {});
    const std::string text(reinterpret_cast<const char*>(data), size < 512 ? size : 512);
    const std::string b = "the movie was great, wasn't it?";
    tok.encode(text, &b, 64);
    tok.encode("Héllo wörld [SEP] 東京", nullptr, 16);
  });
  return 0;
}
