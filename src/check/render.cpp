// SPDX-License-Identifier: Apache-2.0
#include "check/render.hpp"

#include <algorithm>
#include <map>

namespace dtrain::check {

namespace {

using Row = std::vector<std::string>;

// Left-aligned columns separated by two spaces; the last column is not padded.
std::string columns(const std::vector<Row>& rows, const std::string& indent) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string text;
  for (const auto& row : rows) {
    std::string line = indent;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += line + "\n";
  }
  return text;
}

std::string or_dash(const std::string& text) {
  return text.empty() ? "-" : text;
}

std::string env_or_dash(const RankFacts& facts, const std::string& name) {
  const auto it = facts.environment.find(name);
  return it == facts.environment.end() ? "-" : or_dash(it->second);
}

std::string rank_list(const std::vector<int>& ranks) {
  return bootstrap::format_rank_set(ranks);
}

std::string describe_gpus(const NodeReport& node) {
  if (!node.gpus) return node.topology_error.empty() ? "unknown" : "unknown (topology unavailable)";
  if (node.gpus->empty()) return "none";
  // "2 x NVIDIA H100 (0000:1b:00.0, 0000:43:00.0)", one group per model.
  std::vector<std::string> models;
  std::map<std::string, std::vector<std::string>> bus_ids;
  for (const auto& gpu : *node.gpus) {
    if (!bus_ids.contains(gpu.model)) models.push_back(gpu.model);
    bus_ids[gpu.model].push_back(gpu.bus_id);
  }
  std::string text;
  for (const auto& model : models) {
    const auto& ids = bus_ids[model];
    std::string list;
    for (const auto& id : ids) list += (list.empty() ? "" : ", ") + id;
    text += (text.empty() ? "" : "; ") + std::to_string(ids.size()) + " x " +
            (model.empty() ? std::string("unknown model") : model) + " (" + list + ")";
  }
  return text;
}

std::string port_state(const RankFacts& facts) {
  std::string text;
  for (const auto& port : facts.ports) {
    text += (text.empty() ? "" : ", ") + (port.role == "master" ? std::string("master ") : "") +
            (port.in_use ? "IN USE" : "free");
  }
  return or_dash(text);
}

std::size_t count(const CheckReport& report, Severity severity) {
  return static_cast<std::size_t>(
      std::count_if(report.findings.begin(), report.findings.end(),
                    [&](const Finding& f) { return f.severity == severity; }));
}

}  // namespace

std::string render_report(const CheckReport& report) {
  std::string text = "dtrain-check: " + std::to_string(report.nodes.size()) + " node" +
                     (report.nodes.size() == 1 ? "" : "s") + ", " +
                     std::to_string(report.ranks.size()) + " rank" +
                     (report.ranks.size() == 1 ? "" : "s") + ", plugin " +
                     (report.plugin_in_effect ? "in effect" : "NOT in effect") + "\n\n";

  std::vector<Row> nodes = {{"node", "ranks", "GPUs"}};
  for (const auto& node : report.nodes) {
    nodes.push_back({node.host, rank_list(node.ranks), describe_gpus(node)});
  }
  text += "Nodes\n" + columns(nodes, "  ") + "\n";

  std::vector<Row> ranks = {{"rank", "node", "local", "CUDA_VISIBLE_DEVICES", "NCCL_IB_HCA",
                             "NCCL_SOCKET_IFNAME", "DTRAIN_CPU_LIST", "Cpus_allowed_list",
                             "endpoint", "ports"}};
  for (const auto& facts : report.ranks) {
    std::string endpoint;
    for (const auto& port : facts.ports) {
      if (port.role == "endpoint") endpoint = port.endpoint;
    }
    ranks.push_back({std::to_string(facts.rank), facts.host, std::to_string(facts.local_rank),
                     env_or_dash(facts, "CUDA_VISIBLE_DEVICES"), env_or_dash(facts, "NCCL_IB_HCA"),
                     env_or_dash(facts, "NCCL_SOCKET_IFNAME"),
                     env_or_dash(facts, "DTRAIN_CPU_LIST"), or_dash(facts.cpus_allowed),
                     or_dash(endpoint.empty() ? facts.listen_endpoint : endpoint),
                     port_state(facts)});
  }
  text +=
      "Binding and ports (checked before the preflight listened)\n" + columns(ranks, "  ") + "\n";

  text += "Fingerprint\n";
  if (report.fingerprint_table.empty()) {
    std::vector<Row> fields;
    for (const auto& field : bootstrap::fingerprint_fields()) {
      fields.push_back({field.label, report.fingerprint.*field.member});
    }
    text += "  the same on every rank:\n" + columns(fields, "    ") + "\n";
  } else {
    std::string table;
    std::size_t start = 0;
    while (start < report.fingerprint_table.size()) {
      const auto end = report.fingerprint_table.find('\n', start);
      table += "  " + report.fingerprint_table.substr(start, end - start) + "\n";
      if (end == std::string::npos) break;
      start = end + 1;
    }
    text += "  the ranks DIFFER:\n" + table + "\n";
  }

  text += "Endpoint reachability (connectivity preflight)\n";
  if (!report.preflight_ran) {
    text += "  not run\n\n";
  } else if (report.preflight_failures.empty()) {
    text += "  " + std::to_string(report.probes) + " probes between " +
            std::to_string(report.ranks.size()) + " ranks, all connected\n\n";
  } else {
    text += "  " + std::to_string(report.preflight_failures.size()) + " failures in " +
            std::to_string(report.probes) + " probes:\n";
    for (const auto& failure : report.preflight_failures) text += "    " + failure + "\n";
    text += "\n";
  }

  text += "NCCL/UCX/CUDA environment\n";
  if (report.environment.empty()) {
    text += "  no NCCL_*, UCX_* or CUDA_* variable is set\n";
  } else {
    std::vector<Row> env = {{"variable", "value", "nodes", "ranks"}};
    for (const auto& variable : report.environment) {
      bool first = true;
      for (const auto& value : variable.values) {
        std::string nodes_text;
        for (const auto& node : value.nodes) nodes_text += (nodes_text.empty() ? "" : ",") + node;
        env.push_back({first ? variable.name : "", value.set ? or_dash(value.value) : "(unset)",
                       nodes_text, rank_list(value.ranks)});
        first = false;
      }
      if (variable.values.size() > 1) {
        env.back().push_back(variable.per_task ? "(per task binding)" : "DIFFERS");
      }
    }
    text += columns(env, "  ");
  }
  text += "\n";

  text += "Findings\n";
  if (report.findings.empty()) text += "  none\n";
  for (const auto& finding : report.findings) {
    const FindingKind& kind = finding_kind(finding.id);
    text += "  [" + std::string(severity_name(finding.severity)) + "] " + finding.id + ": " +
            finding.detail + "\n";
    text += "      symptom: " + std::string(kind.symptom) + "\n";
    text += "      fix: " + std::string(kind.fix) + "\n";
  }
  const auto problems = count(report, Severity::kProblem);
  const auto warnings = count(report, Severity::kWarning);
  text += "\nVerdict: " +
          (report.healthy() ? std::string("healthy")
                            : std::to_string(problems) + " problem" + (problems == 1 ? "" : "s")) +
          (warnings > 0 ? ", " + std::to_string(warnings) + " warning" + (warnings == 1 ? "" : "s")
                        : "") +
          "\n";
  return text;
}

nlohmann::json report_to_json(const CheckReport& report) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& node : report.nodes) {
    nlohmann::json gpus = nullptr;
    if (node.gpus) {
      gpus = nlohmann::json::array();
      for (const auto& gpu : *node.gpus) {
        gpus.push_back({{"bus_id", gpu.bus_id}, {"model", gpu.model}});
      }
    }
    nodes.push_back({{"name", node.host},
                     {"ranks", node.ranks},
                     {"gpu_count", node.gpus ? nlohmann::json(node.gpus->size()) : nullptr},
                     {"gpus", gpus},
                     {"topology_error", node.topology_error}});
  }
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& facts : report.ranks) {
    nlohmann::json rank = to_json(facts);
    rank.erase("gpus");  // reported per node
    rank.erase("topology_error");
    ranks.push_back(std::move(rank));
  }
  nlohmann::json fingerprint = nlohmann::json::object();
  for (const auto& field : bootstrap::fingerprint_fields()) {
    fingerprint[field.label] = report.fingerprint.*field.member;
  }
  nlohmann::json environment = nlohmann::json::array();
  for (const auto& variable : report.environment) {
    nlohmann::json values = nlohmann::json::array();
    for (const auto& value : variable.values) {
      values.push_back({{"value", value.set ? nlohmann::json(value.value) : nullptr},
                        {"ranks", value.ranks},
                        {"nodes", value.nodes}});
    }
    environment.push_back({{"name", variable.name},
                           {"per_task", variable.per_task},
                           {"same_everywhere", variable.values.size() == 1},
                           {"values", values}});
  }
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& finding : report.findings) {
    const FindingKind& kind = finding_kind(finding.id);
    findings.push_back(
        {{"id", finding.id},
         {"severity", severity_name(finding.severity)},
         {"node", finding.node.empty() ? nlohmann::json(nullptr) : nlohmann::json(finding.node)},
         {"rank", finding.rank < 0 ? nlohmann::json(nullptr) : nlohmann::json(finding.rank)},
         {"detail", finding.detail},
         {"symptom", kind.symptom},
         {"fix", kind.fix}});
  }
  return {{"tool", "dtrain-check"},
          {"healthy", report.healthy()},
          {"exit_status", report.exit_status()},
          {"plugin_in_effect", report.plugin_in_effect},
          {"node_count", report.nodes.size()},
          {"rank_count", report.ranks.size()},
          {"nodes", nodes},
          {"ranks", ranks},
          {"fingerprint",
           {{"consistent", report.fingerprint_table.empty()},
            {"rank0", fingerprint},
            {"mismatch_table", report.fingerprint_table}}},
          {"preflight",
           {{"ran", report.preflight_ran},
            {"probes", report.probes},
            {"failures", report.preflight_failures}}},
          {"environment", environment},
          {"findings", findings}};
}

}  // namespace dtrain::check
