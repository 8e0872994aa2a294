// The examples `prune analyze` reads: the first N rows of a GLUE split in file order (pairs encoded as
// pairs), or every sentence of a CoNLL-U treebank tokenized word by word (DEFINITIONS §2), each with the
// per-token facts the accumulators need (special, [SEP], punctuation, rarest tokens, word boundaries).
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

#include "analysis/head_stats.h"
#include "core/data/batching.h"
#include "core/data/glue.h"
#include "core/text/tokenizer.h"

namespace hp::analysis {

struct AnalysisInputs {
  core::EncodedDataset data;
  std::vector<ExampleInfo> info;
  std::vector<std::string> text;  // one line per example (for the report)
  std::string source;  // "sst2/dev: first 1000 rows" or the treebank path
  long skipped = 0;  // treebank sentences longer than max_seq_len
};

// Word-piece counts over `texts` (pairs contribute both sides), specials excluded: [vocab].
std::vector<int64_t> token_counts(const core::Tokenizer& tok, const std::vector<core::Example>& texts,
                                  int max_len);

// The first `n` (0 = all) examples of a task split, in file order.
AnalysisInputs task_inputs(const core::Tokenizer& tok, const std::vector<core::Example>& rows, long n,
                           int max_len, const std::vector<int64_t>& counts, const std::string& source);

// Every sentence of a CoNLL-U file. A word without word pieces is an InputError naming its line.
AnalysisInputs treebank_inputs(const core::Tokenizer& tok, const std::string& path, int max_len,
                               const std::vector<int64_t>& counts);

}  // namespace hp::analysis
