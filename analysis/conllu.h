// CoNLL-U reader for `prune analyze --syntax` (analysis/DEFINITIONS.md §2, §4; Clark et al. 2019
// §4.1): each sentence's syntactic words, gold HEAD and DEPREL (universaldependencies.org/format).
// Torch-free. Word-piece alignment and the syntactic-head scores live in hp_analysis.
#pragma once

#include <string>
#include <vector>

namespace hp::analysis {

// A sentence: its m = words.size() syntactic words (ranges "3-4" and empty nodes "5.1" left out).
struct DepSentence {
  std::vector<std::string> words;  // FORM of each word
  std::vector<int> heads;  // 0 = root, else the 1-based index of the head in words
  std::vector<std::string> deprels;  // DEPREL as written ("nmod:poss")
  std::string sent_id;  // from "# sent_id = ..." before the sentence, or ""
  int line = 0;  // 1-based line of its first token line (a range line counts)
};

// Reads a UTF-8 CoNLL-U file (BOM, CRLF, no final blank line all fine). Throws hp::InputError
// "path:line: <what> (field N NAME); <fix>" on bad columns, ID, FORM, HEAD, no sentence, no file.
std::vector<DepSentence> read_conllu(const std::string& path);

}  // namespace hp::analysis
