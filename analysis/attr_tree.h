// Hao et al.'s attribution tree (AAAI 2021 §4.2, their examples/attribution_tree.py), for any number of
// layers: from each layer's attention attribution summed over heads, the token the information flows to
// at the top, and the edges (layer, from, to) through which it got there, top-down. Torch-free; the
// attribution itself comes from prune/attattr (prune::attention_attribution), the command is
// `prune explain` (analysis/explain.h). Definition: analysis/DEFINITIONS.md §10.
#pragma once

#include <string>
#include <vector>

namespace hp::analysis {

using Matrix = std::vector<std::vector<double>>;  // [S][S], row = query (from), column = key (to)

struct TreeEdge {
  int layer = 0, from = 0, to = 0;
  double score = 0;  // the layer's attribution normalised by its largest entry outside the [CLS] row
};

struct AttrTree {
  int root = -1;
  std::vector<TreeEdge> edges;  // in the order the construction adds them
  std::vector<double> heights;  // [S]: (L−1)/L at the root, one layer lower per step down; 0 = not placed
};

// att[l]: layer l's attribution summed over heads, [S][S] over the real tokens. threshold: Hao's 0.4.
AttrTree attribution_tree(const std::vector<Matrix>& att, double threshold);

// The tree drawn as a layered graph (tokens on the x axis in order, each placed node at its height, edges
// as arrows with opacity by score; tokens outside the tree faded on the bottom row). Standalone SVG.
std::string svg_tree(const AttrTree& t, const std::vector<std::string>& tokens, const std::string& title);

// The tree as Graphviz dot (ranks by height), for `dot -Tsvg` when Graphviz is installed.
std::string dot_tree(const AttrTree& t, const std::vector<std::string>& tokens);

}  // namespace hp::analysis
