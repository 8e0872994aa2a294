// SVG plots (see core/plot/plot.h).
#include "core/plot/plot.h"

#include <filesystem>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "core/base/files.h"
#include "core/base/log.h"
#include "core/base/process.h"
#include "core/base/xml.h"

namespace hp::core {

using core::xml_escape;

namespace {

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#7f7f7f", "#9467bd", "#8c564b", "#17becf"};

std::string num(double v, int prec = 3) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*g", prec, v);
  return buf;
}

// Round tick positions covering [lo, hi].
std::vector<double> ticks(double lo, double hi) {
  const double span = hi - lo > 0 ? hi - lo : 1.0;
  const double raw = span / 5, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
  std::vector<double> t;
  // Each tick a multiple of the step (no sum that drifts to 5.55e-17 where 0 belongs).
  for (double k = std::ceil(lo / step); k * step <= hi + 1e-9 * span; ++k) t.push_back(k == 0 ? 0.0 : k * step);
  return t;
}

// Ticks of a log axis over [lo, hi] (values, not logs): 1, 2 and 5 times the powers of ten inside; a range too
// narrow for three of those gets 1, 1.5, 2, 3, 4, 5 and 7 times them, and a narrower one the linear axis's ticks.
std::vector<double> log_ticks(double lo, double hi) {
  for (const auto& mantissas : {std::vector<double>{1, 2, 5}, std::vector<double>{1, 1.5, 2, 3, 4, 5, 7}}) {
    std::vector<double> t;
    for (double mag = std::pow(10.0, std::floor(std::log10(lo))); mag <= hi; mag *= 10)
      for (double m : mantissas)
        if (m * mag >= lo * (1 - 1e-9) && m * mag <= hi * (1 + 1e-9)) t.push_back(m * mag);
    if (t.size() >= 3) return t;
  }
  return ticks(lo, hi);
}

// The plot area: data ranges and the maps from data to pixels.
struct Frame {
  static constexpr double W = 760, H = 480, left = 70, right = 170, top = 40, bottom = 60;
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  bool log_x = false;
  double tx(double x) const { return log_x ? std::log10(x) : x; }
  double px(double x) const { return left + (tx(x) - tx(x0)) / (tx(x1) - tx(x0)) * (W - left - right); }
  double py(double y) const { return top + (y1 - y) / (y1 - y0) * (H - top - bottom); }
};

Frame frame_of(const LineChart& c) {
  Frame f;
  f.log_x = c.log_x;
  for (const auto& s : c.series)
    for (size_t i = 0; i < s.x.size(); ++i) {
      f.x0 = std::min(f.x0, s.x[i]), f.x1 = std::max(f.x1, s.x[i]);
      f.y0 = std::min({f.y0, s.y[i], s.lo.empty() ? s.y[i] : s.lo[i]});
      f.y1 = std::max({f.y1, s.y[i], s.hi.empty() ? s.y[i] : s.hi[i]});
    }
  if (!std::isnan(c.y_ref)) f.y0 = std::min(f.y0, c.y_ref), f.y1 = std::max(f.y1, c.y_ref);
  if (f.x0 > f.x1) f.x0 = f.log_x ? 1 : 0, f.x1 = f.log_x ? 10 : 1, f.y0 = 0, f.y1 = 1;
  if (f.log_x) {  // a little room on both sides, as the linear axis has at its ticks
    f.x0 = std::max(f.x0, 1e-12) / 1.1, f.x1 = std::max(f.x1, 1e-12) * 1.1;
  } else if (f.x1 == f.x0) {
    f.x1 = f.x0 + 1;
  }
  const double pad = (f.y1 - f.y0) * 0.05 + 1e-9;
  f.y0 -= pad, f.y1 += pad;
  return f;
}

// Title, grid with tick labels, frame, axis labels and the dashed reference line.
void draw_axes(std::ostringstream& o, const LineChart& c, const Frame& f) {
  const double W = Frame::W, H = Frame::H, left = Frame::left, right = Frame::right, top = Frame::top,
               bottom = Frame::bottom;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << xml_escape(c.title)
    << "</text>\n";
  for (double t : f.log_x ? log_ticks(f.x0, f.x1) : ticks(f.x0, f.x1))
    o << "<line x1=\"" << f.px(t) << "\" y1=\"" << top << "\" x2=\"" << f.px(t) << "\" y2=\"" << H - bottom
      << "\" stroke=\"#e5e5e5\"/><text x=\"" << f.px(t) << "\" y=\"" << H - bottom + 16
      << "\" text-anchor=\"middle\">" << num(t) << "</text>\n";
  for (double t : ticks(f.y0, f.y1))
    o << "<line x1=\"" << left << "\" y1=\"" << f.py(t) << "\" x2=\"" << W - right << "\" y2=\"" << f.py(t)
      << "\" stroke=\"#e5e5e5\"/><text x=\"" << left - 6 << "\" y=\"" << f.py(t) + 4 << "\" text-anchor=\"end\">"
      << num(t) << "</text>\n";
  o << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << W - left - right << "\" height=\""
    << H - top - bottom << "\" fill=\"none\" stroke=\"black\"/>\n";
  o << "<text x=\"" << (left + W - right) / 2 << "\" y=\"" << H - 18 << "\" text-anchor=\"middle\">"
    << xml_escape(c.x_label) << "</text>\n<text transform=\"translate(18," << (top + H - bottom) / 2
    << ") rotate(-90)\" text-anchor=\"middle\">" << xml_escape(c.y_label) << "</text>\n";
  if (!std::isnan(c.y_ref))
    o << "<line x1=\"" << left << "\" y1=\"" << f.py(c.y_ref) << "\" x2=\"" << W - right << "\" y2=\""
      << f.py(c.y_ref) << "\" stroke=\"black\" stroke-dasharray=\"5,4\"/><text x=\"" << W - right - 4 << "\" y=\""
      << f.py(c.y_ref) - 5 << "\" text-anchor=\"end\">" << xml_escape(c.y_ref_label) << "</text>\n";
}

// One marker at (x, y): a dot, a square for the second round of the palette's colours (a scatter of many series),
// or a large open ring.
void marker(std::ostringstream& o, const Series& s, size_t k, double x, double y, const std::string& color) {
  constexpr size_t kN = sizeof kColors / sizeof *kColors;
  if (s.ring)
    o << "<circle cx=\"" << x << "\" cy=\"" << y << "\" r=\"9\" fill=\"none\" stroke=\"" << color
      << "\" stroke-width=\"2\"/>";
  else if (s.markers_only && k >= kN)
    o << "<rect x=\"" << x - 4.5 << "\" y=\"" << y - 4.5 << "\" width=\"9\" height=\"9\" fill=\"" << color << "\"/>";
  else
    o << "<circle cx=\"" << x << "\" cy=\"" << y << "\" r=\"" << (s.markers_only ? 5 : 3) << "\" fill=\"" << color
      << "\"/>";
}

// Series k: its band, line (unless markers only), points and legend entry.
void draw_series(std::ostringstream& o, const Series& s, size_t k, const Frame& f) {
  constexpr size_t kN = sizeof kColors / sizeof *kColors;
  const std::string color = s.color.empty() ? kColors[k % kN] : s.color;
  // Past the palette (e.g. 12 heads' gates), dashes tell the series apart.
  const std::string dash = k < kN ? "" : k < 2 * kN ? " stroke-dasharray=\"6,3\"" : " stroke-dasharray=\"2,2\"";
  if (!s.lo.empty() && s.x.size() > 1) {
    o << "<polygon fill=\"" << color << "\" fill-opacity=\"0.15\" stroke=\"none\" points=\"";
    for (size_t i = 0; i < s.x.size(); ++i) o << f.px(s.x[i]) << "," << f.py(s.hi[i]) << " ";
    for (size_t i = s.x.size(); i-- > 0;) o << f.px(s.x[i]) << "," << f.py(s.lo[i]) << " ";
    o << "\"/>\n";
  }
  if (!s.markers_only) {
    o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\"" << dash << " points=\"";
    for (size_t i = 0; i < s.x.size(); ++i) o << f.px(s.x[i]) << "," << f.py(s.y[i]) << " ";
    o << "\"/>\n";
  }
  for (size_t i = 0; i < s.x.size(); ++i) marker(o, s, k, f.px(s.x[i]), f.py(s.y[i]), color), o << "\n";
  const double ly = Frame::top + 10 + 20 * static_cast<double>(k), lx = Frame::W - Frame::right;
  if (s.ring) {  // a ring of r 9 does not fit a legend row
    o << "<circle cx=\"" << lx + 24 << "\" cy=\"" << ly << "\" r=\"5\" fill=\"none\" stroke=\"" << color
      << "\" stroke-width=\"2\"/>";
  } else if (s.markers_only) {
    marker(o, s, k, lx + 24, ly, color);
  } else {
    o << "<line x1=\"" << lx + 12 << "\" y1=\"" << ly << "\" x2=\"" << lx + 36 << "\" y2=\"" << ly << "\" stroke=\""
      << color << "\" stroke-width=\"3\"" << dash << "/>";
  }
  o << "<text x=\"" << lx + 42 << "\" y=\"" << ly + 4 << "\">" << xml_escape(s.name) << "</text>\n";
}

}  // namespace

Series& LineChart::series_named(const std::string& name, bool markers_only) {
  for (Series& s : series)
    if (s.name == name) return s;
  Series s;
  s.name = name, s.markers_only = markers_only;
  return series.emplace_back(std::move(s));
}

std::string svg_line_chart(const LineChart& c) {
  const Frame f = frame_of(c);
  std::ostringstream o;
  draw_axes(o, c, f);
  for (size_t k = 0; k < c.series.size(); ++k) draw_series(o, c.series[k], k, f);
  o << "</svg>\n";
  return o.str();
}

std::string svg_heatmap(const Heatmap& m) {
  const size_t L = m.values.size(), Hn = L ? m.values[0].size() : 0;
  const double cell = 34, left = 70, top = 50, W = left + cell * Hn + 90, Ht = top + cell * L + 50;
  double lo = 1e300, hi = -1e300;
  for (size_t l = 0; l < L; ++l)
    for (size_t h = 0; h < Hn; ++h)
      if (m.present.empty() || m.present[l][h]) lo = std::min(lo, m.values[l][h]), hi = std::max(hi, m.values[l][h]);
  if (lo > hi) lo = 0, hi = 1;
  auto color = [&](double v) {  // white (low) to dark blue (high)
    const double t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
    char buf[16];
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x", static_cast<int>(255 - 225 * t), static_cast<int>(255 - 170 * t),
                  static_cast<int>(255 - 75 * t));
    return std::string(buf);
  };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << Ht
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">" << xml_escape(m.title)
    << "</text>\n";
  for (size_t l = 0; l < L; ++l) {
    o << "<text x=\"" << left - 8 << "\" y=\"" << top + cell * l + cell / 2 + 4 << "\" text-anchor=\"end\">layer " << l
      << "</text>\n";
    for (size_t h = 0; h < Hn; ++h) {
      const bool here = m.present.empty() || m.present[l][h];
      o << "<rect x=\"" << left + cell * h << "\" y=\"" << top + cell * l << "\" width=\"" << cell << "\" height=\""
        << cell << "\" fill=\"" << (here ? color(m.values[l][h]) : "#f0f0f0") << "\" stroke=\"white\"><title>layer "
        << l << " head " << h << ": " << num(m.values[l][h], 4) << "</title></rect>\n";
    }
  }
  for (size_t h = 0; h < Hn; ++h)
    o << "<text x=\"" << left + cell * h + cell / 2 << "\" y=\"" << top + cell * L + 16 << "\" text-anchor=\"middle\">"
      << h << "</text>\n";
  o << "<text x=\"" << left + cell * Hn / 2 << "\" y=\"" << top + cell * L + 36
    << "\" text-anchor=\"middle\">head</text>\n";
  const double bx = left + cell * Hn + 20;
  for (int i = 0; i < 10; ++i)
    o << "<rect x=\"" << bx << "\" y=\"" << top + (cell * L) * (9 - i) / 10 << "\" width=\"16\" height=\""
      << cell * L / 10 + 1 << "\" fill=\"" << color(lo + (hi - lo) * (i + 0.5) / 10) << "\"/>\n";
  o << "<text x=\"" << bx + 20 << "\" y=\"" << top + 10 << "\">" << num(hi) << "</text><text x=\"" << bx + 20
    << "\" y=\"" << top + cell * L << "\">" << num(lo) << "</text>\n</svg>\n";
  return o.str();
}

std::string write_svg_and_png(const std::string& svg_path, const std::string& svg) {
  core::write_file_atomic(svg_path, svg);
  static const bool have = core::run_program({"rsvg-convert", "--version"}, /*quiet=*/true) == 0;
  if (!have) {
    static bool warned = false;
    if (!warned) core::log_warn("plot", "rsvg-convert not found (apt install librsvg2-bin): SVG plots only, no PNG");
    warned = true;
    return "";
  }
  const std::string png = svg_path.substr(0, svg_path.size() - 4) + ".png";
  std::error_code ec;
  // Its own messages stay out of the log (a full disk made it print raw cairo errors); a failure is one warning
  // naming the cause where the disk tells it, and no partial PNG is left.
  if (const int rc = core::run_program({"rsvg-convert", "-f", "png", "-o", png + ".tmp", svg_path}, /*quiet=*/true);
      rc != 0) {
    std::filesystem::remove(png + ".tmp", ec);
    const auto space = std::filesystem::space(std::filesystem::path(png).parent_path().empty()
                                                  ? std::filesystem::path(".")
                                                  : std::filesystem::path(png).parent_path(), ec);
    core::log_warn("plot", png + " was not drawn (rsvg-convert exit " + std::to_string(rc) + ")" +
                               (!ec && space.available < (1u << 20) ? ": the disk is full; free disk space and rerun "
                                                                      "the command for the PNG"
                                                                    : "; open the SVG beside it instead") +
                               "; " + svg_path + " is complete");
    return "";
  }
  std::filesystem::rename(png + ".tmp", png, ec);
  if (ec) {
    core::log_warn("plot", "could not rename " + png + ".tmp: " + ec.message() + "; the SVG is still there");
    return "";
  }
  return png;
}

}  // namespace hp::core
