// CoNLL-U treebanks (core/data/conllu.h).
#include "core/data/conllu.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = hp::fuzz::as_file(data, size, "treebank.conllu");
  hp::fuzz::expect_clean([&] { hp::core::read_conllu(path); });
  return 0;
}
