// SPDX-License-Identifier: Apache-2.0
#include "bench/plot_input.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "core/parse.hpp"

namespace dtrain::bench {

namespace {

// One row of a table or of a --json document, as the chart needs it.
struct BusbwRow {
  std::string collective;  // empty where the input does not say (nccl-tests' table)
  std::string type;
  std::string redop;
  double size = 0;
  double out_of_place = 0;
  double in_place = 0;
};

std::string join_label(std::string_view prefix, const std::vector<std::string>& parts) {
  std::string label;
  for (const auto& part : parts) {
    if (part.empty()) continue;
    if (!label.empty()) label += ' ';
    label += part;
  }
  return prefix.empty() ? label : std::string(prefix) + ": " + label;
}

Chart busbw_chart(const std::vector<BusbwRow>& rows, std::string_view label_prefix) {
  Chart chart;
  chart.x_label = kSizeLabel;
  chart.y_label = kBusbwLabel;
  chart.x_ticks = TickFormat::kBytes;
  // Collectives in the order they first appear, and each one's (type, redop) pairs likewise.
  std::vector<std::string> collectives;
  for (const auto& row : rows) {
    if (std::find(collectives.begin(), collectives.end(), row.collective) == collectives.end()) {
      collectives.push_back(row.collective);
    }
  }
  for (const auto& collective : collectives) {
    std::vector<std::pair<std::string, std::string>> kinds;
    for (const auto& row : rows) {
      const std::pair kind{row.type, row.redop};
      if (row.collective == collective &&
          std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
        kinds.push_back(kind);
      }
    }
    for (const auto& [type, redop] : kinds) {
      // The type and reduction name a curve only where they tell it from another one.
      const std::string kind_label =
          kinds.size() > 1 ? type + (redop == "none" ? "" : " " + redop) : "";
      for (const bool in_place : {false, true}) {
        PlotSeries series;
        series.label = join_label(label_prefix,
                                  {collective, kind_label, in_place ? "in-place" : "out-of-place"});
        series.group = std::string(label_prefix) + '\n' + collective + '\n' + type + '\n' + redop;
        series.dashed = in_place;
        for (const auto& row : rows) {
          if (row.collective == collective && row.type == type && row.redop == redop) {
            series.points.push_back({row.size, in_place ? row.in_place : row.out_of_place});
          }
        }
        std::stable_sort(series.points.begin(), series.points.end(),
                         [](const PlotPoint& a, const PlotPoint& b) { return a.x < b.x; });
        chart.series.push_back(std::move(series));
      }
    }
  }
  return chart;
}

std::optional<double> parse_double(std::string_view token) {
  double value = 0;
  const auto [end, error] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (error != std::errc() || end != token.data() + token.size()) return std::nullopt;
  return value;
}

bool is_unsigned(std::string_view token) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(token.data(), token.data() + token.size(), value);
  return error == std::errc() && end == token.data() + token.size();
}

std::vector<std::string_view> tokens_of(std::string_view line) {
  std::vector<std::string_view> tokens;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) tokens.push_back(line.substr(start, i - start));
  }
  return tokens;
}

// nccl-tests' rows end in eight columns: time algbw busbw #wrong, out-of-place then in-place
// (#wrong is "N/A" where unchecked; versions before 2.10 print an error ratio there). Before
// them come size and count, then type, redop and root in current versions, fewer in old ones.
std::vector<BusbwRow> table_rows(std::string_view text) {
  constexpr std::size_t kMeasured = 8;
  constexpr std::string_view kCollectiveHeading = "# Collective ";  // dtrain-bench's
  std::vector<BusbwRow> rows;
  std::string collective;
  for (std::string_view line : core::split(text, '\n')) {
    if (line.starts_with(kCollectiveHeading)) {
      const auto name = tokens_of(line.substr(kCollectiveHeading.size()));
      collective = name.empty() ? "" : std::string(name.front());
      if (collective.ends_with(',')) collective.pop_back();
      continue;
    }
    const auto tokens = tokens_of(line);
    if (tokens.size() < kMeasured + 2 || !is_unsigned(tokens[0]) || !is_unsigned(tokens[1])) {
      continue;
    }
    const std::size_t first = tokens.size() - kMeasured;
    const auto out_of_place = parse_double(tokens[first + 2]);
    const auto in_place = parse_double(tokens[first + 6]);
    const auto size = parse_double(tokens[0]);
    if (!out_of_place || !in_place || !size || !parse_double(tokens[first]) ||
        !parse_double(tokens[first + 4])) {
      continue;
    }
    BusbwRow row;
    row.collective = collective;
    if (first >= 4) {
      row.type = tokens[2];
      row.redop = tokens[3];
    }
    row.size = *size;
    row.out_of_place = *out_of_place;
    row.in_place = *in_place;
    rows.push_back(std::move(row));
  }
  return rows;
}

TickFormat tick_format(const std::string& name, std::string_view path) {
  if (name == "bytes") return TickFormat::kBytes;
  if (name == "number") return TickFormat::kNumber;
  throw_invalid(std::string(path) + ": \"x_ticks\" " + core::quote_for_error(name) +
                " is not known; use \"bytes\" or \"number\"");
}

Chart chart_from_series_file(const nlohmann::json& doc, std::string_view path) {
  Chart chart;
  chart.title = doc.value("title", "");
  chart.x_label = doc.at("x_label").get<std::string>();
  chart.y_label = doc.at("y_label").get<std::string>();
  chart.x_ticks = tick_format(doc.value("x_ticks", "number"), path);
  for (const auto& entry : doc.at("series")) {
    PlotSeries series;
    series.label = entry.at("label").get<std::string>();
    series.group = entry.value("group", series.label);
    series.dashed = entry.value("dashed", false);
    for (const auto& point : entry.at("points")) {
      if (!point.is_array() || point.size() != 2) {
        throw_invalid(std::string(path) + ": a point of series " +
                      core::quote_for_error(series.label) + " is not [x, y]");
      }
      series.points.push_back({point[0].get<double>(), point[1].get<double>()});
    }
    chart.series.push_back(std::move(series));
  }
  if (chart.series.empty()) throw_invalid(std::string(path) + ": \"series\" is empty");
  return chart;
}

// The "tool" member, or "" where there is none or it is not a string.
std::string tool_of(const nlohmann::json& doc) {
  if (!doc.is_object()) return "";
  const auto tool = doc.find("tool");
  return tool != doc.end() && tool->is_string() ? tool->get<std::string>() : "";
}

}  // namespace

Chart busbw_chart_from_report(const nlohmann::json& report, std::string_view source,
                              std::string_view label_prefix) {
  if (tool_of(report) != "dtrain-bench") {
    throw_invalid(std::string(source) +
                  " is not dtrain-bench --json output (no \"tool\": \"dtrain-bench\")");
  }
  std::vector<BusbwRow> rows;
  try {
    for (const auto& collective : report.at("collectives")) {
      const auto name = collective.at("collective").get<std::string>();
      for (const auto& entry : collective.at("rows")) {
        rows.push_back({name, entry.at("type").get<std::string>(),
                        entry.at("redop").get<std::string>(), entry.at("size").get<double>(),
                        entry.at("out_of_place").at("busbw").get<double>(),
                        entry.at("in_place").at("busbw").get<double>()});
      }
    }
  } catch (const nlohmann::json::exception& error) {
    throw_invalid(std::string(source) + ": dtrain-bench --json output in a form this dtrain " +
                  "does not read: " + error.what());
  }
  if (rows.empty()) {
    throw_invalid(std::string(source) +
                  " holds no collective results (a --bootstrap-only run?); give a sweep's "
                  "--json output");
  }
  return busbw_chart(rows, label_prefix);
}

Chart chart_from_file_text(std::string_view text, std::string_view path) {
  const std::string label_prefix = std::filesystem::path(path).filename().string();
  const auto start = text.find_first_not_of(" \t\r\n");
  if (start != std::string_view::npos && text[start] == '{') {
    const auto doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded()) {
      throw_invalid(std::string(path) +
                    " starts as JSON but does not parse as JSON; give dtrain-bench --json "
                    "output, a dtrain-plot series file or nccl-tests' output");
    }
    const std::string tool = tool_of(doc);
    if (tool == "dtrain-bench") return busbw_chart_from_report(doc, path, label_prefix);
    if (tool == "dtrain-plot") {
      try {
        return chart_from_series_file(doc, path);
      } catch (const nlohmann::json::exception& error) {
        throw_invalid(std::string(path) + ": not a dtrain-plot series file: " + error.what());
      }
    }
    throw_invalid(std::string(path) +
                  " is JSON but neither dtrain-bench --json output (\"tool\": \"dtrain-bench\") "
                  "nor a dtrain-plot series file (\"tool\": \"dtrain-plot\")");
  }
  const auto rows = table_rows(text);
  if (rows.empty()) {
    throw_invalid(std::string(path) +
                  " is neither JSON nor nccl-tests or dtrain-bench output: it has no table row "
                  "(size count type redop root, then time algbw busbw #wrong out-of-place and "
                  "in-place); give dtrain-bench --json output or the output of nccl-tests' "
                  "*_perf");
  }
  return busbw_chart(rows, label_prefix);
}

Chart load_chart_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_invalid("cannot open " + path + ": " + std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw_invalid("cannot read " + path + ": " + std::strerror(errno));
  return chart_from_file_text(text, path);
}

void merge_chart(Chart& into, Chart from, std::string_view from_path) {
  if (std::tie(into.x_label, into.y_label, into.x_ticks) !=
      std::tie(from.x_label, from.y_label, from.x_ticks)) {
    throw_invalid(std::string(from_path) + " plots " + core::quote_for_error(from.y_label) +
                  " against " + core::quote_for_error(from.x_label) + ", not " +
                  core::quote_for_error(into.y_label) + " against " +
                  core::quote_for_error(into.x_label) + "; plot it on its own");
  }
  for (auto& series : from.series) into.series.push_back(std::move(series));
}

}  // namespace dtrain::bench
