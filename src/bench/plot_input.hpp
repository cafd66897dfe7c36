// SPDX-License-Identifier: Apache-2.0
#pragma once
// The inputs a chart is drawn from (bench/plot.hpp), read from text already in memory:
//   - dtrain-bench --json output: busbw against size, one series per collective (and data type
//     and reduction, where a run has several) and per in-place mode;
//   - the table nccl-tests or dtrain-bench prints (size count type redop root, then time algbw
//     busbw #wrong out-of-place and in-place): the same series, busbw read from the table;
//   - a dtrain-plot series file (JSON, "tool": "dtrain-plot"), for any other chart, such as
//     tests/trainer/scaling_figures.sh's samples/s against ranks:
//       {"tool": "dtrain-plot", "title": "...", "x_label": "ranks", "x_ticks": "number",
//        "y_label": "samples/s",
//        "series": [{"label": "ddp", "group": "ddp", "dashed": false,
//                    "points": [[1, 830.5], [2, 1502.0]]}]}
//     ("title", "group" and "dashed" may be left out; "x_ticks" is "bytes" or "number").

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>

#include "bench/plot.hpp"

namespace dtrain::bench {

// busbw against size from a dtrain-bench --json document. Labels start with label_prefix
// (and ": ") unless it is empty. Throws dtrain::Error naming `source` when the document is not
// dtrain-bench's.
Chart busbw_chart_from_report(const nlohmann::json& report, std::string_view source,
                              std::string_view label_prefix);

// Any of the three inputs above, told apart by their content; `path` names the input in errors
// and its file name starts every series' label. Throws dtrain::Error naming `path` when the text
// is none of them.
Chart chart_from_file_text(std::string_view text, std::string_view path);

// Reads the file at `path` and calls chart_from_file_text(); a file that cannot be read is a
// dtrain::Error naming it as well.
Chart load_chart_file(const std::string& path);

// Adds `from`'s series to `into`, which keeps its title. Throws dtrain::Error naming
// `from_path` when the two charts have different axes.
void merge_chart(Chart& into, Chart from, std::string_view from_path);

// The y and x axis names of a busbw chart, shared by every busbw input.
inline constexpr const char* kBusbwLabel = "busbw (GB/s)";
inline constexpr const char* kSizeLabel = "message size (bytes)";

}  // namespace dtrain::bench
