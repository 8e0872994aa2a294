// Hao et al.'s attribution tree (see analysis/attr_tree.h).
#include "analysis/attr_tree.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <utility>

#include "core/base/xml.h"

namespace hp::analysis {

namespace {

enum Fixed { kAbsent = -1, kOpen = 0, kFixed = 1 };  // not in the tree / in it, may gain a parent / done

}  // namespace

AttrTree attribution_tree(const std::vector<Matrix>& att, double threshold) {
  AttrTree t;
  const int L = static_cast<int>(att.size());
  const int S = L > 0 ? static_cast<int>(att[0].size()) : 0;
  t.heights.assign(S, 0.0);
  if (L == 0 || S < 2) return t;

  // Each layer over its largest entry outside the [CLS] query row; at or below the threshold → 0.
  std::vector<Matrix> prop = att;
  for (auto& m : prop) {
    double mx = -INFINITY;
    for (int i = 1; i < S; ++i)
      for (int j = 0; j < S; ++j) mx = std::max(mx, m[i][j]);
    const double scale = std::abs(mx);
    for (auto& row : m)
      for (double& v : row) {
        v = scale > 0 ? v / scale : 0.0;
        if (!(v > threshold)) v = 0.0;
      }
  }

  // The root: the token (not [CLS]) whose row of the summed, normalised attribution (self and negative
  // entries removed) is largest. Ties go to the later token, as the reversed argsort of Hao's code does.
  Matrix sum(S, std::vector<double>(S, 0.0));
  double mx = -INFINITY;
  for (const auto& m : att)
    for (int i = 0; i < S; ++i)
      for (int j = 0; j < S; ++j) sum[i][j] += m[i][j];
  for (const auto& row : sum)
    for (double v : row) mx = std::max(mx, v);
  std::vector<std::pair<double, int>> rows;
  for (int i = 0; i < S; ++i) {
    double r = 0;
    for (int j = 0; j < S; ++j) {
      const double v = mx != 0 ? sum[i][j] / std::abs(mx) : 0.0;
      if (i != 0 && i != j && v > 0) r += v;
    }
    rows.push_back({r, i});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  t.root = rows.back().second != 0 ? rows.back().second : rows[rows.size() - 2].second;

  std::vector<int> fixed(S, kAbsent);
  std::set<std::pair<int, int>> linked;
  auto link = [&](int layer, int i, int j) {
    t.edges.push_back({layer, i, j, prop[layer][i][j]});
    linked.insert({i, j});
  };
  t.heights[t.root] = static_cast<double>(L - 1) / L;
  fixed[t.root] = kOpen;
  if (L < 2) return t;
  for (int i = 0; i < S; ++i)
    if (i != t.root && prop[L - 2][t.root][i] > threshold) {
      fixed[i] = kOpen;
      fixed[t.root] = kFixed;
      link(L - 2, t.root, i);
    }
  for (int layer = L - 3; layer >= 0; --layer)
    for (int i = 1; i < S; ++i)
      for (int j = 0; j < S; ++j) {
        if (prop[layer][i][j] < threshold || fixed[i] == kAbsent) continue;
        if (fixed[j] == kFixed || linked.count({i, j})) continue;
        if (fixed[j] == kOpen) continue;  // both in the tree already (i open or fixed)
        if (fixed[i] == kOpen) {  // j absent: i gets its child, j hangs one layer below i
          fixed[i] = kFixed;
          t.heights[j] = (t.heights[i] * L - 1) / L;
        } else {  // i fixed, j absent: j goes to the lowest height in use
          t.heights[j] = *std::min_element(t.heights.begin(), t.heights.end());
        }
        fixed[j] = kOpen;
        link(layer, i, j);
      }
  return t;
}

std::string svg_tree(const AttrTree& t, const std::vector<std::string>& tokens, const std::string& title) {
  const int S = static_cast<int>(tokens.size());
  std::vector<bool> in_tree(S, false);
  if (t.root >= 0) in_tree[t.root] = true;
  for (const auto& e : t.edges) in_tree[e.from] = in_tree[e.to] = true;
  // Rows: the distinct heights of the placed tokens, highest first; the tokens outside the tree last.
  std::vector<double> levels;
  for (int i = 0; i < S; ++i)
    if (in_tree[i]) levels.push_back(t.heights[i]);
  std::sort(levels.begin(), levels.end(), std::greater<>());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  size_t longest = 0;
  for (const auto& tk : tokens) longest = std::max(longest, tk.size());
  const double col = std::max(64.0, 7.5 * static_cast<double>(longest) + 14), row = 70, left = 40, top = 60;
  const double width = std::max(480.0, left * 2 + col * S), height = top + row * (levels.size() + 1) + 30;
  auto x = [&](int i) { return left + col * (i + 0.5); };
  auto y = [&](int i) {
    if (!in_tree[i]) return top + row * levels.size();
    return top + row * (std::find(levels.begin(), levels.end(), t.heights[i]) - levels.begin());
  };
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
        "orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#1f4e9c\"/></marker></defs>\n"
     << "<text x=\"" << left << "\" y=\"24\" font-size=\"15\">" << core::xml_escape(title) << "</text>\n"
     << "<text x=\"" << left
     << "\" y=\"42\" fill=\"#555\">edges: layer, from → to (attribution over the layer's "
        "largest); faded tokens are outside the tree</text>\n";
  for (const auto& e : t.edges) {
    const double x1 = x(e.from), y1 = y(e.from) + 10, x2 = x(e.to), y2 = y(e.to) - 14;
    os << "<line x1=\"" << x1 << "\" y1=\"" << y1 << "\" x2=\"" << x2 << "\" y2=\"" << y2
       << "\" stroke=\"#1f4e9c\" stroke-width=\"2\" stroke-opacity=\"" << std::clamp(0.25 + 0.75 * e.score, 0.25, 1.0)
       << "\" marker-end=\"url(#arrow)\"><title>layer " << e.layer << ": " << core::xml_escape(tokens[e.from]) << " → "
       << core::xml_escape(tokens[e.to]) << " " << e.score << "</title></line>\n";
    os << "<text x=\"" << (x1 + x2) / 2 + 4 << "\" y=\"" << (y1 + y2) / 2 << "\" fill=\"#1f4e9c\" font-size=\"10\">L"
       << e.layer << "</text>\n";
  }
  for (int i = 0; i < S; ++i) {
    const bool root = i == t.root;
    os << "<g opacity=\"" << (in_tree[i] ? 1.0 : 0.35) << "\"><rect x=\"" << x(i) - col / 2 + 3 << "\" y=\""
       << y(i) - 14 << "\" width=\"" << col - 6 << "\" height=\"24\" rx=\"5\" fill=\"" << (root ? "#f4b183" : "#dbe8f7")
       << "\" stroke=\"#1f4e9c\"/><text x=\"" << x(i) << "\" y=\"" << y(i) + 3 << "\" text-anchor=\"middle\">"
       << core::xml_escape(tokens[i]) << "</text></g>\n";
  }
  os << "</svg>\n";
  return os.str();
}

std::string dot_tree(const AttrTree& t, const std::vector<std::string>& tokens) {
  std::ostringstream os;
  os << "digraph attribution_tree {\n  rankdir=TB;\n  node [shape=box, style=rounded];\n";
  std::set<int> used;
  if (t.root >= 0) used.insert(t.root);
  for (const auto& e : t.edges) used.insert(e.from), used.insert(e.to);
  for (int i : used) {
    std::string label;
    for (char c : tokens[i]) label += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    os << "  t" << i << " [label=\"" << label << "\""
       << (i == t.root ? ", style=\"rounded,filled\", fillcolor=\"#f4b183\"" : "") << "];\n";
  }
  for (const auto& e : t.edges)
    os << "  t" << e.from << " -> t" << e.to << " [label=\"L" << e.layer << "\", penwidth=" << 1 + 2 * e.score
       << "];\n";
  os << "}\n";
  return os.str();
}

}  // namespace hp::analysis
