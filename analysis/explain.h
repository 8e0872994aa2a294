// `prune explain`: Hao et al.'s attribution tree of one example (a row of a split, or a text). The
// attention attribution of every layer comes from the importance criterion's own code
// (prune::attention_attribution), summed over heads; the tree from analysis/attr_tree.h. Writes
// tree.json, tree.svg (+ .png) and tree.dot into explain.out.
#pragma once

#include <string>
#include <vector>

#include "analysis/attr_tree.h"
#include "core/model/bert.h"
#include "core/base/config.h"

namespace hp::core {
class Tokenizer;
struct Example;
struct TaskSpec;
}  // namespace hp::core

namespace hp::analysis {

struct Explanation {
  std::vector<std::string> tokens;
  int target = 0;  // the class attributed
  double probability = 0;  // its probability under the model
  std::vector<Matrix> attribution;  // [L][S][S], summed over heads
  AttrTree tree;
};

// The attribution tree of one example. `steps`/`riemann`: prune.attattr_steps / attattr_riemann;
// `gold`: attribute the gold label (the example must have one), else the predicted class.
Explanation explain_example(const core::Bert& model, const core::Tokenizer& tok, const core::Example& ex,
                            int max_seq_len, int steps, const std::string& riemann, bool gold, double threshold);

// InputError naming `what` when the example needs more than max_seq_len word pieces: explanations and
// views refuse to truncate (the missing end would silently be left out).
void check_fits(const core::Tokenizer& tok, const core::Example& ex, int max_seq_len, const std::string& what);

// model.path with its own classifier for data.task (explain and triggers: a random classifier would be
// explained), checked against data.max_seq_len. InputError naming the folder and the fix otherwise.
core::Bert load_fine_tuned(const core::Config& cfg, const std::string& command);

// The example to explain: explain.text, or row explain.example of explain.split; `id` names it ("text",
// "example<k>"). Refuses text that would be truncated (the tree would silently miss its end), a row past
// the split's end, and explain.target = gold without a label.
core::Example pick_example(const core::Config& cfg, const core::TaskSpec& task, const core::Tokenizer& tok,
                           std::string& id);

// tree.json, tree.dot and tree.svg (+ .png) of `x`, the explanation of `ex` (named `id`), into `out`.
void write_explanation(const core::Config& cfg, const core::TaskSpec& task, const core::Example& ex,
                       const std::string& id, const Explanation& x, const std::string& out);

// The tree in one line: its root and every edge, e.g. "root 'good' (2), 1 edges: L3 film->good".
std::string tree_line(const Explanation& x);

}  // namespace hp::analysis
