// SPDX-License-Identifier: Apache-2.0
// dtrain-plot: draws earlier results as an SVG line chart, with the same code as
// dtrain-bench --plot (bench/plot.hpp), and without MPI, so that it runs anywhere.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "bench/plot.hpp"
#include "bench/plot_input.hpp"
#include "core/error.hpp"
#include "trainer/checkpoint_store.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "dtrain-plot: draw results as an SVG line chart. Each INPUT is dtrain-bench --json output "
      "or the table that nccl-tests' *_perf or dtrain-bench prints (busbw against message "
      "size, one line per collective and in-place mode), or a dtrain-plot series file (JSON "
      "with \"tool\": \"dtrain-plot\", as tests/trainer/scaling_figures.sh --plot writes; "
      "src/bench/plot_input.hpp describes it). Every INPUT must have the same axes; each "
      "line's label starts with its file's name."};
  std::vector<std::string> inputs;
  std::string output, title;
  app.add_option("INPUT", inputs, "files to draw, on one pair of axes")->required();
  app.add_option("-o,--output", output, "the SVG file to write (replaced atomically)")->required();
  app.add_option("--title", title,
                 "the chart's title (default: the first series file's, else the axes' names)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "dtrain: dtrain-plot: %s (see --help)\n", error.what());
    return 2;
  }
  try {
    dtrain::bench::Chart chart = dtrain::bench::load_chart_file(inputs.front());
    for (std::size_t i = 1; i < inputs.size(); ++i) {
      dtrain::bench::merge_chart(chart, dtrain::bench::load_chart_file(inputs[i]), inputs[i]);
    }
    if (!title.empty()) {
      chart.title = title;
    } else if (chart.title.empty()) {
      chart.title = chart.y_label + " against " + chart.x_label;
    }
    const std::string svg = dtrain::bench::render_svg(chart);
    dtrain::trainer::write_file_atomically(output, std::as_bytes(std::span(svg)));
  } catch (const dtrain::Error& error) {
    std::fprintf(stderr, "dtrain: dtrain-plot: %s\n", error.what());
    return error.kind() == dtrain::ErrorKind::kInvalidInput ? 2 : 1;
  }
  return 0;
}
