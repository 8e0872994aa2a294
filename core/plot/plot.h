// Plots written as standalone SVG (no plotting library needed to look at them), converted to PNG with
// rsvg-convert (Debian librsvg2-bin) when it is installed. Torch-free.
#pragma once

#include <limits>
#include <string>
#include <vector>

namespace hp::core {

struct Series {
  std::string name;
  std::vector<double> x, y, lo, hi;  // lo/hi: optional interval band (same length as y, or empty)
  bool markers_only = false;  // points without the line through them (a scatter)
  std::string color = {};  // e.g. "black"; empty: the palette's colour of the series' place
  bool ring = false;  // markers as large open rings (to mark a chosen point over others)
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  double y_ref = std::numeric_limits<double>::quiet_NaN();  // optional dashed reference line
  std::string y_ref_label;
  bool log_x = false;  // logarithmic x axis (x > 0), ticks at 1, 2, 5 × powers of ten
  // The series called `name`, appended empty (a scatter when `markers_only`) where the chart has none yet.
  Series& series_named(const std::string& name, bool markers_only = false);
};

struct Heatmap {
  std::string title;
  std::vector<std::vector<double>> values;  // rows = layers, columns = heads
  std::vector<std::vector<bool>> present;  // false = blank cell (head absent); empty = all present
};

std::string svg_line_chart(const LineChart& chart);
std::string svg_heatmap(const Heatmap& map);

// Writes `svg` to path (atomically) and, when rsvg-convert exists, the PNG beside it (same stem).
// Returns the PNG path, or "" when no converter is available.
std::string write_svg_and_png(const std::string& svg_path, const std::string& svg);

}  // namespace hp::core
