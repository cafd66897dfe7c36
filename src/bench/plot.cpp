// SPDX-License-Identifier: Apache-2.0
#include "bench/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.hpp"

namespace dtrain::bench {

namespace {

// Tableau 10: distinct in colour and in lightness, so that neighbouring curves stay apart.
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr std::size_t kPaletteSize = sizeof kPalette / sizeof kPalette[0];

constexpr double kMinHeight = 480;
constexpr double kPlotLeft = 80;
constexpr double kPlotTop = 64;
constexpr double kPlotWidth = 620;
constexpr double kPlotHeight = 350;
constexpr double kLegendLeft = kPlotLeft + kPlotWidth + 24;
constexpr double kLegendSwatch = 30;
constexpr double kLegendRow = 20;
// DejaVu Sans at 12 px averages under 7 px a character; labels longer than this are shortened
// in the middle, where file names and operation names differ least.
constexpr double kCharWidth = 7;
constexpr std::size_t kMaxLabelChars = 56;
constexpr std::size_t kMaxXTicks = 10;
constexpr int kYTicks = 5;

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

// Beyond this, powers of two and grid steps near the data overflow a double.
constexpr double kLargest = 1e300;

bool drawable(const PlotPoint& point) {
  return std::isfinite(point.x) && std::isfinite(point.y) && point.x > 0 && point.x <= kLargest &&
         std::fabs(point.y) <= kLargest;
}

// Counts code points, not bytes, so that a non-ASCII label gets the width it needs.
std::size_t display_length(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

std::string shorten(const std::string& text, std::size_t max_chars) {
  if (display_length(text) <= max_chars) return text;
  // Cut on code-point boundaries: keep the first and last (max_chars - 1) / 2 characters.
  const std::size_t keep = (max_chars - 1) / 2;
  std::size_t head = 0;
  for (std::size_t seen = 0; head < text.size(); ++head) {
    if ((static_cast<unsigned char>(text[head]) & 0xC0) != 0x80 && seen++ == keep) break;
  }
  std::size_t tail = text.size();
  for (std::size_t seen = 0; tail > 0;) {
    --tail;
    if ((static_cast<unsigned char>(text[tail]) & 0xC0) != 0x80 && ++seen == keep) break;
  }
  return text.substr(0, head) + "\u2026" + text.substr(tail);
}

// 1, 2, 2.5 or 5 times a power of ten: the y grid step for about kYTicks intervals.
double nice_step(double span) {
  const double raw = span / kYTicks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double factor : {1.0, 2.0, 2.5, 5.0}) {
    if (raw <= factor * magnitude * (1 + 1e-9)) return factor * magnitude;
  }
  return 10 * magnitude;
}

// As many decimals as the step needs (2.5 one, 0.25 two), so that every tick reads the same.
std::string y_tick(double value, double step) {
  int decimals = 0;
  while (decimals < 6) {
    const double scaled = step * std::pow(10.0, decimals);
    if (std::fabs(scaled - std::round(scaled)) < 1e-6 * scaled) break;
    ++decimals;
  }
  char text[48];
  if (step >= 1e6) {
    std::snprintf(text, sizeof text, "%g", value);  // 2e+06, not seven digits and more
  } else {
    std::snprintf(text, sizeof text, "%.*f", decimals, std::fabs(value) < step / 2 ? 0.0 : value);
  }
  return text;
}

struct Axes {
  int x_low_exponent = 0;  // the x axis spans 2^x_low_exponent .. 2^x_high_exponent
  int x_high_exponent = 0;
  int x_tick_stride = 1;  // a tick every this many powers of two
  double y_low = 0;
  double y_high = 1;
  double y_step = 0.2;

  double px(double x) const {
    return kPlotLeft +
           (std::log2(x) - x_low_exponent) / (x_high_exponent - x_low_exponent) * kPlotWidth;
  }
  double py(double y) const {
    return kPlotTop + kPlotHeight - (y - y_low) / (y_high - y_low) * kPlotHeight;
  }
};

Axes fit_axes(const Chart& chart) {
  double x_min = std::numeric_limits<double>::infinity(), x_max = 0;
  double y_min = 0, y_max = 0;
  for (const auto& series : chart.series) {
    for (const auto& point : series.points) {
      if (!drawable(point)) continue;
      x_min = std::min(x_min, point.x);
      x_max = std::max(x_max, point.x);
      y_min = std::min(y_min, point.y);
      y_max = std::max(y_max, point.y);
    }
  }
  Axes axes;
  axes.x_low_exponent = static_cast<int>(std::floor(std::log2(x_min) + 1e-9));
  axes.x_high_exponent = static_cast<int>(std::ceil(std::log2(x_max) - 1e-9));
  if (axes.x_high_exponent == axes.x_low_exponent) {
    --axes.x_low_exponent;
    ++axes.x_high_exponent;
  }
  while (static_cast<std::size_t>((axes.x_high_exponent - axes.x_low_exponent) /
                                  axes.x_tick_stride) >= kMaxXTicks) {
    axes.x_tick_stride *= 2;
  }
  if (y_max - y_min <= 0) y_max = 1;  // every value 0: an axis up to 1 rather than none
  axes.y_step = nice_step(y_max - y_min);
  axes.y_low = y_min < 0 ? std::floor(y_min / axes.y_step) * axes.y_step : 0;
  axes.y_high = std::ceil(y_max / axes.y_step - 1e-9) * axes.y_step;
  return axes;
}

void append_text(std::string& svg, double x, double y, const std::string& anchor,
                 const std::string& text, const std::string& extra = "") {
  svg += "<text x=\"" + number(x) + "\" y=\"" + number(y) + "\" text-anchor=\"" + anchor + "\"" +
         extra + ">" + escape_xml(text) + "</text>\n";
}

void append_line(std::string& svg, double x1, double y1, double x2, double y2,
                 const std::string& style) {
  svg += "<line x1=\"" + number(x1) + "\" y1=\"" + number(y1) + "\" x2=\"" + number(x2) +
         "\" y2=\"" + number(y2) + "\" " + style + "/>\n";
}

int floor_div(int value, int divisor) {
  return value >= 0 ? value / divisor : -((-value + divisor - 1) / divisor);
}

}  // namespace

std::string escape_xml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      switch (byte) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&apos;";
          break;
        default:
          out += byte < 0x20 && byte != '\t' && byte != '\n' && byte != '\r' ? '?' : text[i];
          break;
      }
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence of 2-4 bytes (no overlong forms, no surrogates, at most
    // U+10FFFF) is copied; anything else becomes '?', one byte at a time.
    std::size_t length = 0;
    unsigned lowest_second = 0x80, highest_second = 0xBF;
    if (byte >= 0xC2 && byte <= 0xDF) {
      length = 2;
    } else if (byte >= 0xE0 && byte <= 0xEF) {
      length = 3;
      if (byte == 0xE0) lowest_second = 0xA0;
      if (byte == 0xED) highest_second = 0x9F;
    } else if (byte >= 0xF0 && byte <= 0xF4) {
      length = 4;
      if (byte == 0xF0) lowest_second = 0x90;
      if (byte == 0xF4) highest_second = 0x8F;
    }
    bool valid = length != 0 && i + length <= text.size();
    for (std::size_t k = 1; valid && k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      valid = k == 1 ? next >= lowest_second && next <= highest_second : (next & 0xC0) == 0x80;
    }
    if (!valid) {
      out += '?';
      ++i;
      continue;
    }
    // U+FFFE and U+FFFF are not XML characters either.
    if (length == 3 && byte == 0xEF && static_cast<unsigned char>(text[i + 1]) == 0xBF &&
        static_cast<unsigned char>(text[i + 2]) >= 0xBE) {
      out += '?';
    } else {
      out.append(text.substr(i, length));
    }
    i += length;
  }
  return out;
}

std::string format_tick(double value, TickFormat format) {
  char text[48];
  if (format == TickFormat::kBytes) {
    constexpr struct {
      double scale;
      const char* suffix;
    } kUnits[] = {{1099511627776.0, "T"}, {1073741824.0, "G"}, {1048576.0, "M"}, {1024.0, "K"}};
    for (const auto& unit : kUnits) {
      if (value >= unit.scale) {
        std::snprintf(text, sizeof text, "%g%s", value / unit.scale, unit.suffix);
        return text;
      }
    }
  }
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string render_svg(const Chart& chart) {
  std::size_t left_out = 0, drawn = 0;
  for (const auto& series : chart.series) {
    for (const auto& point : series.points) (drawable(point) ? drawn : left_out) += 1;
  }
  if (drawn == 0) {
    throw_invalid("nothing to plot: " +
                  (chart.series.empty()
                       ? std::string("no series")
                       : "every point is left out (x at or below 0, or a value that is not a "
                         "number or beyond 1e300)"));
  }
  const Axes axes = fit_axes(chart);

  std::size_t longest_label = 0;
  for (const auto& series : chart.series) {
    longest_label = std::max(longest_label, display_length(shorten(series.label, kMaxLabelChars)));
  }
  const double width = std::ceil(kLegendLeft + kLegendSwatch + 8 +
                                 static_cast<double>(longest_label) * kCharWidth + 16);
  // Taller than the plot when the legend needs it.
  const double height = std::max(
      kMinHeight, kPlotTop + 8 + static_cast<double>(chart.series.size()) * kLegendRow + 16);

  std::string svg;
  svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(width) + "\" height=\"" +
         number(height) + "\" viewBox=\"0 0 " + number(width) + " " + number(height) +
         "\" font-family=\"DejaVu Sans, Verdana, sans-serif\" font-size=\"12\">\n";
  // An opaque background: the chart stays readable on a dark page.
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  append_text(svg, width / 2, 28, "middle",
              shorten(chart.title, static_cast<std::size_t>(width / 10)),
              " font-size=\"16\" font-weight=\"bold\"");
  if (left_out > 0) {
    append_text(svg, width / 2, 48, "middle",
                std::to_string(left_out) + (left_out == 1 ? " point" : " points") +
                    " not shown (x at or below 0, or a value that is not a number or beyond 1e300)",
                " fill=\"#b00000\"");
  }

  // Grid and tick labels.
  svg += "<g stroke=\"#dddddd\" stroke-width=\"1\">\n";
  std::string labels;
  const int first_tick = floor_div(axes.x_low_exponent, axes.x_tick_stride) * axes.x_tick_stride;
  for (int exponent = first_tick; exponent <= axes.x_high_exponent;
       exponent += axes.x_tick_stride) {
    if (exponent < axes.x_low_exponent) continue;
    const double x = axes.px(std::exp2(exponent));
    append_line(svg, x, kPlotTop, x, kPlotTop + kPlotHeight, "");
    append_text(labels, x, kPlotTop + kPlotHeight + 18, "middle",
                format_tick(std::exp2(exponent), chart.x_ticks));
  }
  const int y_intervals = static_cast<int>(std::lround((axes.y_high - axes.y_low) / axes.y_step));
  for (int i = 0; i <= y_intervals; ++i) {
    const double value = axes.y_low + i * axes.y_step;
    const double y = axes.py(value);
    append_line(svg, kPlotLeft, y, kPlotLeft + kPlotWidth, y, "");
    append_text(labels, kPlotLeft - 8, y + 4, "end", y_tick(value, axes.y_step));
  }
  svg += "</g>\n<g fill=\"#333333\">\n" + labels + "</g>\n";
  svg += "<rect x=\"" + number(kPlotLeft) + "\" y=\"" + number(kPlotTop) + "\" width=\"" +
         number(kPlotWidth) + "\" height=\"" + number(kPlotHeight) +
         "\" fill=\"none\" stroke=\"#333333\" stroke-width=\"1\"/>\n";
  append_text(svg, kPlotLeft + kPlotWidth / 2, kPlotTop + kPlotHeight + 44, "middle",
              chart.x_label + " (log scale)");
  append_text(
      svg, 0, 0, "middle", chart.y_label,
      " transform=\"translate(22 " + number(kPlotTop + kPlotHeight / 2) + ") rotate(-90)\"");

  // Curves, then the legend; a group keeps the colour of its first series.
  std::vector<std::string> groups;
  double legend_y = kPlotTop + 8;
  for (const auto& series : chart.series) {
    auto group = std::find(groups.begin(), groups.end(), series.group);
    if (group == groups.end()) group = groups.insert(groups.end(), series.group);
    const std::string colour =
        kPalette[static_cast<std::size_t>(group - groups.begin()) % kPaletteSize];
    const std::string dash = series.dashed ? " stroke-dasharray=\"7 4\"" : "";
    svg += "<g stroke=\"" + colour + "\" fill=\"" + colour + "\">\n<title>" +
           escape_xml(series.label) + "</title>\n<polyline fill=\"none\" stroke-width=\"2\"" +
           dash + " points=\"";
    std::string markers;
    for (const auto& point : series.points) {
      if (!drawable(point)) continue;
      const std::string x = number(axes.px(point.x)), y = number(axes.py(point.y));
      svg += x + "," + y + " ";
      markers += "<circle cx=\"" + x + "\" cy=\"" + y + "\" r=\"3\"/>\n";
    }
    svg += "\"/>\n" + markers + "</g>\n";
    append_line(svg, kLegendLeft, legend_y, kLegendLeft + kLegendSwatch, legend_y,
                "stroke=\"" + colour + "\" stroke-width=\"2\"" + dash);
    append_text(svg, kLegendLeft + kLegendSwatch + 8, legend_y + 4, "start",
                shorten(series.label, kMaxLabelChars));
    legend_y += kLegendRow;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace dtrain::bench
