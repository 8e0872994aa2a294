// Role map and head map as SVG (see analysis/plots.h).
#include "analysis/plots.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace hp::analysis {

namespace {

// One letter per role in the role map, with its legend text. Order = drawing order.
struct RoleGlyph {
  const char* role;
  const char* letter;
  const char* colour;
};
constexpr RoleGlyph kGlyphs[] = {{"positional", "P", "#1f77b4"}, {"local", "L", "#2ca02c"},
                                 {"delimiter", "D", "#7f7f7f"},  {"cls", "C", "#d62728"},
                                 {"sep", "S", "#9467bd"},        {"block", "B", "#8c564b"},
                                 {"syntactic", "Y", "#e377c2"},  {"syntactic_head", "H", "#bcbd22"},
                                 {"rare", "R", "#17becf"}};

std::string layer_colour(int l, int layers) {
  // A blue→orange ramp over the layers.
  const double t = layers > 1 ? static_cast<double>(l) / (layers - 1) : 0;
  std::ostringstream os;
  os << "rgb(" << static_cast<int>(31 + t * (255 - 31)) << "," << static_cast<int>(119 + t * (127 - 119)) << ","
     << static_cast<int>(180 - t * (180 - 14)) << ")";
  return os.str();
}

}  // namespace

std::string svg_role_map(const Analysis& a) {
  const int cell = 46, left = 60, top = 50, legend = 24;
  const int w = left + a.max_heads * cell + 20, h = top + a.layers * cell + 40 + legend * 2;
  std::ostringstream os;
  os << "<svg xmlns='http://www.w3.org/2000/svg' width='" << w << "' height='" << h << "' font-family='sans-serif'>\n"
     << "<rect width='100%' height='100%' fill='white'/>\n"
     << "<text x='" << left << "' y='24' font-size='15'>Head roles after Holm correction (layers x heads)</text>\n";
  for (int l = 0; l < a.layers; ++l) {
    os << "<text x='" << left - 8 << "' y='" << top + l * cell + cell / 2 + 4 << "' font-size='12' text-anchor='end'>L"
       << l << "</text>\n";
    for (int hd = 0; hd < a.max_heads; ++hd) {
      const int x = left + hd * cell, y = top + l * cell;
      const bool present = a.present[l * a.max_heads + hd] != 0;
      os << "<rect x='" << x << "' y='" << y << "' width='" << cell - 2 << "' height='" << cell - 2 << "' fill='"
         << (present ? "#f7f7f7" : "#dddddd") << "' stroke='#cccccc'/>\n";
      if (!present) continue;
      int k = 0;
      for (const auto& g : kGlyphs) {
        auto it = a.roles.find(g.role);
        if (it == a.roles.end() || it->second.holm[l][hd] != 1.0) continue;
        os << "<text x='" << x + 5 + (k % 4) * 10 << "' y='" << y + 15 + (k / 4) * 14
           << "' font-size='12' font-weight='bold' fill='" << g.colour << "'>" << g.letter << "</text>\n";
        ++k;
      }
    }
  }
  for (int hd = 0; hd < a.max_heads; ++hd)
    os << "<text x='" << left + hd * cell + cell / 2 << "' y='" << top - 6 << "' font-size='11' text-anchor='middle'>"
       << hd << "</text>\n";
  int x = left, y = top + a.layers * cell + 24;
  for (const auto& g : kGlyphs) {
    if (!a.roles.count(g.role)) continue;
    os << "<text x='" << x << "' y='" << y << "' font-size='12'><tspan font-weight='bold' fill='" << g.colour << "'>"
       << g.letter << "</tspan> " << g.role << "</text>\n";
    x += 22 + 8 * static_cast<int>(std::string(g.role).size());
    if (x > w - 120) x = left, y += legend;
  }
  os << "</svg>\n";
  return os.str();
}

std::string svg_head_map(const Analysis& a) {
  const int size = 520, pad = 50;
  double lo_x = INFINITY, hi_x = -INFINITY, lo_y = INFINITY, hi_y = -INFINITY;
  for (const auto& p : a.mds)
    if (!std::isnan(p[0]))
      lo_x = std::min(lo_x, p[0]), hi_x = std::max(hi_x, p[0]), lo_y = std::min(lo_y, p[1]),
      hi_y = std::max(hi_y, p[1]);
  const double sx = hi_x > lo_x ? (size - 2 * pad) / (hi_x - lo_x) : 1,
               sy = hi_y > lo_y ? (size - 2 * pad) / (hi_y - lo_y) : 1;
  std::ostringstream os;
  os << "<svg xmlns='http://www.w3.org/2000/svg' width='" << size + 110 << "' height='" << size
     << "' font-family='sans-serif'>\n"
     << "<rect width='100%' height='100%' fill='white'/>\n"
     << "<text x='" << pad
     << "' y='24' font-size='15'>Head map: MDS of Jensen-Shannon divergences (Clark et al. 2019)</text>\n";
  for (size_t k = 0; k < a.mds.size(); ++k) {
    if (std::isnan(a.mds[k][0])) continue;
    const int l = static_cast<int>(k) / a.max_heads, hd = static_cast<int>(k) % a.max_heads;
    const double x = pad + (a.mds[k][0] - lo_x) * sx, y = size - pad - (a.mds[k][1] - lo_y) * sy;
    os << "<circle cx='" << x << "' cy='" << y << "' r='6' fill='" << layer_colour(l, a.layers)
       << "' stroke='black' stroke-width='0.5'><title>layer " << l << " head " << hd << "</title></circle>\n"
       << "<text x='" << x + 7 << "' y='" << y - 5 << "' font-size='8' fill='#555'>" << l << "-" << hd << "</text>\n";
  }
  for (int l = 0; l < a.layers; ++l)
    os << "<circle cx='" << size + 20 << "' cy='" << pad + l * 20 << "' r='6' fill='" << layer_colour(l, a.layers)
       << "'/>"
       << "<text x='" << size + 32 << "' y='" << pad + l * 20 + 4 << "' font-size='12'>layer " << l << "</text>\n";
  os << "</svg>\n";
  return os.str();
}

}  // namespace hp::analysis
