// CoNLL-U reader (universaldependencies.org/format): each sentence's syntactic words with their UPOS, XPOS, HEAD
// and DEPREL, for `prune analyze --syntax` (analysis/DEFINITIONS.md §2, §4; Clark et al. 2019 §4.1) and for a
// tagger's data (core/data/token_dataset.h). Torch-free. Word-piece alignment lives in hp_analysis.
#pragma once

#include <string>
#include <vector>

namespace hp::core {

// A sentence: its m = words.size() syntactic words (ranges "3-4" and empty nodes "5.1" left out, as the `conllu`
// package's words are the tokens whose id is an int). Every vector has m entries, each field as written.
struct ConlluSentence {
  std::vector<std::string> words;  // FORM of each word
  std::vector<std::string> upos, xpos;  // UPOS and XPOS, "_" when unspecified
  std::vector<int> heads;  // 0 = root, else the 1-based index of the head in words
  std::vector<std::string> deprels;  // DEPREL as written ("nmod:poss")
  std::string sent_id;  // from "# sent_id = ..." before the sentence, or ""
  int line = 0;  // 1-based line of its first token line (a range line counts)
};

// Reads a CoNLL-U file as read_text_lines reads text (core/data/glue.h: BOM, CRLF, no final blank line all fine;
// bytes that are not UTF-8 refused). A line of only spaces and tabs ends a sentence as a blank one does.
// Throws hp::InputError "path:line: <what> (field N NAME); <fix>" on bad columns, ID, FORM, HEAD, no sentence,
// no file.
std::vector<ConlluSentence> read_conllu(const std::string& path);

}  // namespace hp::core
