// Which prune.* keys the mode of a pruning run uses: a key set to other than its default in a mode that never
// reads it (prune.hidden_widths without hidden in prune.structures, --structures with --target-heads, a frontier key
// without --max-drop) is named in one warning at the start, never dropped without a word. One row per key of
// core::PruneConfig; tests/prune/key_use_test.cpp walks every key against every mode and fails on a key without a
// row, so a new key is classified where it is added. Torch-free.
#pragma once

#include <string>
#include <vector>

#include "core/base/config.h"

namespace hp::prune {

struct KeyUse {
  const char* key;  // under prune.
  bool (*used)(const core::PruneConfig& p);  // whether the run that `p` describes reads the key
  const char* only;  // who does, for the warning: "a budget search with hidden in prune.structures"
};

// The table, in no particular order.
const std::vector<KeyUse>& key_use_table();

// One line per key that differs from its default and that the mode of `p` does not use, naming who would:
// "prune.hidden_widths is set but this run does not use it: only a budget search with hidden in prune.structures
// does". Keys without a row are not reported (the test refuses them).
std::vector<std::string> unused_settings(const core::PruneConfig& p);

// The keys of core::PruneConfig, in visit order (for the test's walk).
std::vector<std::string> prune_keys();

}  // namespace hp::prune
