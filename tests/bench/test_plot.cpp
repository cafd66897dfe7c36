// SPDX-License-Identifier: Apache-2.0
// The chart writer (bench/plot.hpp) and what it reads (bench/plot_input.hpp). That the SVG
// renders is checked by render_plot.sh with rsvg-convert.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "bench/plot.hpp"
#include "bench/plot_input.hpp"
#include "bench/sweep.hpp"
#include "core/error.hpp"

namespace {

using namespace dtrain::bench;

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const dtrain::Error& error) {
    return error.what();
  }
  return "(no error)";
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

Chart bytes_chart(std::vector<PlotSeries> series) {
  return {"title", kSizeLabel, kBusbwLabel, TickFormat::kBytes, std::move(series)};
}

TEST(PlotSvg, EscapesTextForXml) {
  EXPECT_EQ(escape_xml("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  EXPECT_EQ(escape_xml("tab\there\x01\x1f"), "tab\there??");
  EXPECT_EQ(escape_xml("1 \xC3\x97 2 \xE2\x80\xA6"), "1 \xC3\x97 2 \xE2\x80\xA6");  // × and …
  EXPECT_EQ(escape_xml("\xFF"), "?");
  EXPECT_EQ(escape_xml("\xC0\xAF"), "??");       // overlong '/'
  EXPECT_EQ(escape_xml("\xED\xA0\x80"), "???");  // a UTF-16 surrogate
  EXPECT_EQ(escape_xml("x\xE2\x82"), "x??");     // cut short
  EXPECT_EQ(escape_xml("\xEF\xBF\xBF"), "?");    // U+FFFF
  EXPECT_EQ(escape_xml("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
}

TEST(PlotSvg, TicksReadAsNcclTestsSizes) {
  EXPECT_EQ(format_tick(1, TickFormat::kBytes), "1");
  EXPECT_EQ(format_tick(512, TickFormat::kBytes), "512");
  EXPECT_EQ(format_tick(1024, TickFormat::kBytes), "1K");
  EXPECT_EQ(format_tick(1536, TickFormat::kBytes), "1.5K");
  EXPECT_EQ(format_tick(32 << 20, TickFormat::kBytes), "32M");
  EXPECT_EQ(format_tick(1 << 30, TickFormat::kBytes), "1G");
  EXPECT_EQ(format_tick(1024, TickFormat::kNumber), "1024");
  EXPECT_EQ(format_tick(8, TickFormat::kNumber), "8");
}

TEST(PlotSvg, PlacesPointsOnALogXAndLinearYAxis) {
  // 1K .. 1M spans ten powers of two; 32K lies half way. y runs from 0 to 10.
  const std::string svg =
      render_svg(bytes_chart({{"a", "a", false, {{1024, 0}, {32768, 5}, {1048576, 10}}}}));
  EXPECT_NE(svg.find("points=\"80.0,414.0 390.0,239.0 700.0,64.0 \""), std::string::npos) << svg;
  EXPECT_EQ(count(svg, "<circle "), 3u);
  // Ten powers of two are too many ticks: every other one, on even powers.
  for (const char* tick : {">1K<", ">4K<", ">16K<", ">64K<", ">256K<", ">1M<"}) {
    EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  }
  EXPECT_EQ(svg.find(">2K<"), std::string::npos);
  for (const char* tick : {">0<", ">2<", ">4<", ">6<", ">8<", ">10<"}) {
    EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  }
  EXPECT_EQ(svg.find(">12<"), std::string::npos);
  EXPECT_NE(svg.find(">busbw (GB/s)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">message size (bytes) (log scale)</text>"), std::string::npos);
  EXPECT_NE(svg.find("width=\"" + std::to_string(724 + 30 + 8 + 7 + 16) + ".0\" height=\"480.0\""),
            std::string::npos)
      << svg.substr(0, 300);
}

TEST(PlotSvg, FractionalStepsKeepTheirDecimals) {
  const std::string svg = render_svg(bytes_chart({{"a", "a", false, {{8, 0.1}, {16, 1.2}}}}));
  for (const char* tick : {">0.00<", ">0.25<", ">1.25<"}) {
    EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  }
}

TEST(PlotSvg, LargeValuesKeepShortTicks) {
  const std::string svg = render_svg(bytes_chart({{"a", "a", false, {{8, 0}, {16, 9e6}}}}));
  for (const char* tick : {">0<", ">2e+06<", ">1e+07<"}) {
    EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  }
}

TEST(PlotSvg, OnePointGetsAnAxisAroundIt) {
  const std::string svg = render_svg(
      {"t", "ranks", "samples/s", TickFormat::kNumber, {{"naive", "naive", false, {{8, 100}}}}});
  EXPECT_NE(svg.find(">4<"), std::string::npos);
  EXPECT_NE(svg.find(">16<"), std::string::npos);
  EXPECT_NE(svg.find("cx=\"390.0\""), std::string::npos) << svg;
}

TEST(PlotSvg, EscapesLabelsAndTitle) {
  Chart chart = bytes_chart({{"run <1> & \"b\"", "g", false, {{8, 1}}}});
  chart.title = "a</text><script>";
  const std::string svg = render_svg(chart);
  EXPECT_NE(svg.find("run &lt;1&gt; &amp; &quot;b&quot;"), std::string::npos);
  EXPECT_NE(svg.find("a&lt;/text&gt;&lt;script&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("<script>"), std::string::npos);
  EXPECT_EQ(svg.find("<1>"), std::string::npos);
}

TEST(PlotSvg, GroupsShareAColourAndInPlaceIsDashed) {
  const std::string svg = render_svg(bytes_chart({{"a oop", "a", false, {{8, 1}, {16, 2}}},
                                                  {"a ip", "a", true, {{8, 1}, {16, 2}}},
                                                  {"b oop", "b", false, {{8, 3}, {16, 4}}}}));
  EXPECT_EQ(count(svg, "<g stroke=\"#1f77b4\""), 2u);
  EXPECT_EQ(count(svg, "<g stroke=\"#ff7f0e\""), 1u);
  EXPECT_EQ(count(svg, "stroke-dasharray"), 2u);  // the curve and its legend line
}

TEST(PlotSvg, LeavesOutPointsALogAxisCannotShowAndSaysSo) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::string svg = render_svg(bytes_chart(
      {{"a", "a", false, {{0, 1}, {8, nan}, {16, 2}, {32, 3}, {1e308, 1}, {64, -1e301}}}}));
  EXPECT_NE(svg.find(">4 points not shown (x at or below 0, or a value that is not a number or "
                     "beyond 1e300)<"),
            std::string::npos);
  EXPECT_EQ(count(svg, "<circle "), 2u);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(PlotSvg, RefusesAChartWithNothingToDraw) {
  EXPECT_EQ(error_of([] { render_svg(bytes_chart({})); }), "nothing to plot: no series");
  EXPECT_EQ(error_of([] {
              render_svg(bytes_chart({{"a", "a", false, {{0, 1}}}}));
            }),
            "nothing to plot: every point is left out (x at or below 0, or a value that is not a "
            "number or "
            "beyond 1e300)");
}

TEST(PlotSvg, LongLabelsAreShortenedAndManySeriesMakeItTaller) {
  const std::string long_label(200, 'x');
  std::vector<PlotSeries> many;
  for (int i = 0; i < 30; ++i) many.push_back({long_label, std::to_string(i), false, {{8, 1.0}}});
  const std::string svg = render_svg(bytes_chart(many));
  EXPECT_EQ(count(svg, std::string(27, 'x') + "\xE2\x80\xA6" + std::string(27, 'x') + "<"), 30u);
  EXPECT_NE(svg.find("width=\"" + std::to_string(724 + 30 + 8 + 55 * 7 + 16) + ".0\" height=\"" +
                     std::to_string(64 + 8 + 30 * 20 + 16) + ".0\""),
            std::string::npos)
      << svg.substr(0, 300);
  // The eleventh group takes the first colour again.
  EXPECT_EQ(count(svg, "<g stroke=\"#1f77b4\""), 3u);
}

constexpr const char* kNcclTestsOutput = R"(# nThread 1 nGpus 1 minBytes 8 maxBytes 1024
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
         512           128     float     sum      -1    20.10    0.03    0.05      0    19.90    0.03    0.06      0
        1024           256     float     sum      -1    20.50    0.05    0.09      0    20.20    0.05    0.10    N/A
node01:1234:1234 [0] NCCL INFO comm 0x55d0 rank 0 nranks 2 - Destroy COMPLETE
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.075
)";

TEST(PlotInput, ReadsNcclTestsOutput) {
  const Chart chart = chart_from_file_text(kNcclTestsOutput, "/runs/nccl 2x.txt");
  EXPECT_EQ(chart.x_label, kSizeLabel);
  EXPECT_EQ(chart.y_label, kBusbwLabel);
  ASSERT_EQ(chart.series.size(), 2u);
  EXPECT_EQ(chart.series[0].label, "nccl 2x.txt: out-of-place");
  EXPECT_EQ(chart.series[1].label, "nccl 2x.txt: in-place");
  EXPECT_FALSE(chart.series[0].dashed);
  EXPECT_TRUE(chart.series[1].dashed);
  EXPECT_EQ(chart.series[0].group, chart.series[1].group);
  ASSERT_EQ(chart.series[1].points.size(), 2u);
  EXPECT_DOUBLE_EQ(chart.series[0].points[1].x, 1024);
  EXPECT_DOUBLE_EQ(chart.series[0].points[1].y, 0.09);
  EXPECT_DOUBLE_EQ(chart.series[1].points[0].y, 0.06);
}

TEST(PlotInput, ReadsOldNcclTestsLayouts) {
  // Before 2.10: no root column, and an error ratio instead of #wrong.
  const Chart chart = chart_from_file_text(
      "#       size         count      type   redop     time   algbw   busbw  error     time   "
      "algbw   busbw  error\n"
      "     8388608       2097152     float     sum    120.4   69.67  121.92  5e-07    119.9   "
      "69.96  122.43  5e-07\n",
      "old.log");
  ASSERT_EQ(chart.series.size(), 2u);
  EXPECT_DOUBLE_EQ(chart.series[0].points.at(0).y, 121.92);
  EXPECT_DOUBLE_EQ(chart.series[1].points.at(0).y, 122.43);
}

TEST(PlotInput, ReadsTheTableDtrainBenchPrints) {
  const Row row{4096, 1024, "float", "sum", -1, {50.0, 0.08, 0.12, 0}, {49.0, 0.08, 0.13, 0}};
  Row other = row;
  other.type = "double";
  other.out_of_place.busbw = 0.5;
  const std::string text = "# Collective all_reduce, backend mpi\n" + table_header() +
                           format_row(row) + format_row(other) +
                           "# Collective broadcast, backend mpi\n" + table_header() +
                           format_row({4096, 1024, "float", "none", 0, {1, 2, 3, 0}, {1, 2, 4, 0}});
  const Chart chart = chart_from_file_text(text, "bench.out");
  ASSERT_EQ(chart.series.size(), 6u);
  EXPECT_EQ(chart.series[0].label, "bench.out: all_reduce float sum out-of-place");
  EXPECT_EQ(chart.series[3].label, "bench.out: all_reduce double sum in-place");
  EXPECT_EQ(chart.series[4].label, "bench.out: broadcast out-of-place");
  EXPECT_DOUBLE_EQ(chart.series[0].points.at(0).y, 0.12);
  EXPECT_DOUBLE_EQ(chart.series[5].points.at(0).y, 4);
  EXPECT_NE(chart.series[0].group, chart.series[2].group);
}

nlohmann::json bench_report() {
  const auto measurement = [](double busbw) {
    return nlohmann::json{{"time_us", 10.0}, {"algbw", busbw}, {"busbw", busbw}, {"wrong", 0}};
  };
  nlohmann::json rows = nlohmann::json::array();
  // Out of order on purpose: the curve is drawn from the smallest size up.
  for (const double size : {2048.0, 1024.0}) {
    rows.push_back({{"size", size},
                    {"count", size / 4},
                    {"type", "float"},
                    {"redop", "sum"},
                    {"root", -1},
                    {"out_of_place", measurement(size / 1000)},
                    {"in_place", measurement(size / 500)}});
  }
  return {{"tool", "dtrain-bench"},
          {"ranks", 2},
          {"collectives", {{{"collective", "all_reduce"}, {"rows", rows}}}}};
}

TEST(PlotInput, ReadsDtrainBenchJson) {
  const Chart chart = chart_from_file_text(bench_report().dump(2), "dir/earlier.json");
  ASSERT_EQ(chart.series.size(), 2u);
  EXPECT_EQ(chart.series[0].label, "earlier.json: all_reduce out-of-place");
  ASSERT_EQ(chart.series[1].points.size(), 2u);
  EXPECT_DOUBLE_EQ(chart.series[1].points[0].x, 1024);
  EXPECT_DOUBLE_EQ(chart.series[1].points[0].y, 1024 / 500.0);
  const Chart own = busbw_chart_from_report(bench_report(), "this run", "");
  EXPECT_EQ(own.series[1].label, "all_reduce in-place");
}

TEST(PlotInput, RefusesJsonThatIsNotDtrainBenchsOrBroken) {
  auto broken = bench_report();
  broken["collectives"][0]["rows"][0]["in_place"].erase("busbw");
  EXPECT_EQ(error_of([&] {
              chart_from_file_text(broken.dump(), "b.json");
            }).rfind("b.json: dtrain-bench --json output in a form this dtrain does not read: ", 0),
            0u);
  auto bootstrap_only = bench_report();
  bootstrap_only["collectives"] = nlohmann::json::array();
  EXPECT_EQ(error_of([&] { chart_from_file_text(bootstrap_only.dump(), "c.json"); }),
            "c.json holds no collective results (a --bootstrap-only run?); give a sweep's "
            "--json output");
  EXPECT_EQ(error_of([] { chart_from_file_text(R"({"tool": 3})", "d.json"); }),
            "d.json is JSON but neither dtrain-bench --json output (\"tool\": \"dtrain-bench\") "
            "nor a dtrain-plot series file (\"tool\": \"dtrain-plot\")");
  EXPECT_EQ(error_of([] { chart_from_file_text("{\"tool\": ", "e.json"); }),
            "e.json starts as JSON but does not parse as JSON; give dtrain-bench --json output, "
            "a dtrain-plot series file or nccl-tests' output");
}

TEST(PlotInput, RefusesTextWithoutATable) {
  for (const char* text : {"", "hello\n", "# size count type\n1 2 3\n"}) {
    EXPECT_EQ(error_of([&] {
                chart_from_file_text(text, "notes.txt");
              }).rfind("notes.txt is neither JSON nor nccl-tests or dtrain-bench output", 0),
              0u)
        << text;
  }
}

TEST(PlotInput, ReadsSeriesFiles) {
  const Chart chart = chart_from_file_text(R"({"tool": "dtrain-plot", "title": "scaling",
      "x_label": "ranks", "y_label": "samples/s", "x_ticks": "number",
      "series": [{"label": "ddp", "points": [[1, 10.5], [2, 20]]},
                 {"label": "ideal", "group": "ddp", "dashed": true, "points": [[1, 10.5]]}]})",
                                           "s.json");
  EXPECT_EQ(chart.title, "scaling");
  EXPECT_EQ(chart.x_ticks, TickFormat::kNumber);
  ASSERT_EQ(chart.series.size(), 2u);
  EXPECT_EQ(chart.series[0].group, "ddp");
  EXPECT_EQ(chart.series[1].group, "ddp");
  EXPECT_TRUE(chart.series[1].dashed);
  EXPECT_DOUBLE_EQ(chart.series[0].points[1].y, 20);

  EXPECT_EQ(error_of([] {
              chart_from_file_text(R"({"tool": "dtrain-plot", "x_label": "r", "y_label": "s",
                  "x_ticks": "log", "series": [{"label": "a", "points": [[1, 2]]}]})",
                                   "t.json");
            }),
            "t.json: \"x_ticks\" 'log' is not known; use \"bytes\" or \"number\"");
  EXPECT_EQ(error_of([] {
              chart_from_file_text(R"({"tool": "dtrain-plot", "x_label": "r", "y_label": "s",
                  "series": [{"label": "a", "points": [[1, 2, 3]]}]})",
                                   "u.json");
            }),
            "u.json: a point of series 'a' is not [x, y]");
  EXPECT_EQ(error_of([] {
              chart_from_file_text(
                  R"({"tool": "dtrain-plot", "x_label": "r", "y_label": "s", "series": []})",
                  "v.json");
            }),
            "v.json: \"series\" is empty");
  EXPECT_EQ(error_of([] {
              chart_from_file_text(R"({"tool": "dtrain-plot", "y_label": "s", "series": []})",
                                   "w.json");
            }).rfind("w.json: not a dtrain-plot series file: ", 0),
            0u);
}

TEST(PlotInput, MergesOnlyChartsWithTheSameAxes) {
  Chart chart = chart_from_file_text(kNcclTestsOutput, "a.txt");
  merge_chart(chart, chart_from_file_text(bench_report().dump(), "b.json"), "b.json");
  EXPECT_EQ(chart.series.size(), 4u);
  EXPECT_EQ(chart.series[3].label, "b.json: all_reduce in-place");
  const Chart scaling = {"", "ranks", "samples/s", TickFormat::kNumber, {}};
  EXPECT_EQ(error_of([&] { merge_chart(chart, scaling, "s.json"); }),
            "s.json plots 'samples/s' against 'ranks', not 'busbw (GB/s)' against 'message size "
            "(bytes)'; plot it on its own");
}

TEST(PlotInput, ReportsAFileItCannotRead) {
  EXPECT_EQ(error_of([] { load_chart_file("/nonexistent/dtrain/plot.json"); }),
            "cannot open /nonexistent/dtrain/plot.json: No such file or directory");
}

}  // namespace
