// What the CLI tests share: running the `prune` executable, the tiny golden model, a tiny data root, and
// the arguments of a small pruning run on them.
#pragma once

#include <filesystem>
#include <string>

namespace hp::test {

struct Run {
  int code;
  std::string output;  // stdout + stderr
};

// A shell command with stdout and stderr together.
Run run_command(const std::string& command);

// `prune ARGS` with stdout and stderr together.
Run run_prune(const std::string& args);

// tests/data/golden/tiny_bert: 2 layers × 4 heads, 3 labels, max_position_embeddings 64.
extern const std::string kTiny;

// A data root with a small mnli_subset (3 classes, like the tiny model) in words of the tiny vocab.
std::string tiny_data_root();

// Arguments of a small pruning run of the tiny model writing to `out`.
std::string tiny_prune_args(const std::string& out);

// The whole file as a string ("" if missing).
std::string slurp(const std::filesystem::path& path);

}  // namespace hp::test
