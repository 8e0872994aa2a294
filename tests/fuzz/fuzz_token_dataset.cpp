// A tagger's data files (core/data/token_dataset.h): the input read as CoNLL-U, CoNLL and JSON lines, and when it
// reads, its tag set made and its tags scored against themselves shifted by one word (eval/seqeval.h).
#include <algorithm>
#include <string>
#include <vector>

#include "core/data/token_dataset.h"
#include "eval/seqeval.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hp::fuzz::as_file(data, size, "data/train.txt");
  using hp::core::TokenFormat;
  for (const auto f : {TokenFormat::kConllu, TokenFormat::kConll, TokenFormat::kJsonl}) {
    hp::fuzz::expect_clean([&] {
      const std::vector<hp::core::TaggedSentence> s = hp::core::read_tagged(path, f, "");
      hp::core::is_bio(hp::core::tag_labels(s, {"O", "B-PER"}));
      std::vector<std::vector<std::string>> gold, pred;
      for (const auto& t : s) {
        gold.push_back(t.tags);
        pred.push_back(t.tags);
        if (!t.tags.empty()) std::rotate(pred.back().begin(), pred.back().begin() + 1, pred.back().end());
      }
      hp::eval::entity_scores(gold, pred);
    });
  }
  return 0;
}
