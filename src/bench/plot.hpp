// SPDX-License-Identifier: Apache-2.0
#pragma once
// Line charts as SVG text, for dtrain-bench --plot, dtrain-plot and
// tests/trainer/scaling_figures.sh --plot: a log2 x axis (message size in bytes, or ranks) and a
// linear y axis from 0 (busbw in GB/s, or samples/s), one polyline per series, a legend.
//
// Why the SVG is written here and not by a library: Debian 12 packages no C++ library that draws
// charts. libsvgpp parses SVG and Qt SVG needs a Qt application; PLplot keeps its state in
// globals, writes only to files and loads its output drivers at run time; Matplot++ is not in
// Debian and, like gnuplot and matplotlib, would need a plotting program on every compute node
// that runs dtrain-bench. A chart of lines, ticks and text is a few SVG elements, written by one
// pure function that the unit tests check and a test renders with rsvg-convert.

#include <string>
#include <string_view>
#include <vector>

namespace dtrain::bench {

struct PlotPoint {
  double x = 0;
  double y = 0;
};

struct PlotSeries {
  std::string label;
  // Series with the same group share a colour (an operation's out-of-place and in-place
  // curves); dashed draws the second of them apart.
  std::string group;
  bool dashed = false;
  std::vector<PlotPoint> points;  // drawn in this order
};

enum class TickFormat {
  kBytes,   // 1, 512, 1K, 32M, 1G (powers of 1024, as nccl-tests reads sizes)
  kNumber,  // 1, 2, 4, 1024
};

struct Chart {
  std::string title;
  std::string x_label;
  std::string y_label;
  TickFormat x_ticks = TickFormat::kBytes;
  std::vector<PlotSeries> series;
};

// The whole SVG document. A log axis cannot show x <= 0, and no axis can show a NaN, an
// infinity or values beyond 1e300 (whose grid would overflow): such points are left out and a
// note under the title says how many. Throws dtrain::Error when no series has a point that can
// be drawn.
std::string render_svg(const Chart& chart);

// Text made safe for SVG character data and attribute values: the five XML entities, control
// characters that XML 1.0 forbids, and bytes that are not UTF-8, each replaced by '?'.
std::string escape_xml(std::string_view text);

// The label of a power of two on a kBytes axis ("1K", "32M") or any value on a kNumber axis.
std::string format_tick(double value, TickFormat format);

}  // namespace dtrain::bench
