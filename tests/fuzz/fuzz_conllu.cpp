// CoNLL-U treebanks (analysis/conllu.h).
#include "analysis/conllu.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = hp::fuzz::as_file(data, size, "treebank.conllu");
  hp::fuzz::expect_clean([&] { hp::analysis::read_conllu(path); });
  return 0;
}
