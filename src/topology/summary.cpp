// SPDX-License-Identifier: Apache-2.0
#include "topology/summary.hpp"

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace dtrain::topology {
namespace {

using nlohmann::json;

json placement_json(const Placement& p) {
  json hops = json::array();
  for (const auto& hop : p.io_path) {
    hops.push_back({{"host_bridge", hop.kind == IoHop::Kind::kHostBridge}, {"id", hop.id}});
  }
  return {{"io_path", hops},
          {"locality",
           {{"id", p.locality.id},
            {"package", p.locality.package},
            {"numa_nodes", p.locality.numa_nodes},
            {"cpus", p.locality.cpus}}}};
}

Placement placement_from(const json& j) {
  Placement p;
  for (const auto& hop : j.at("io_path")) {
    p.io_path.push_back(
        {hop.at("host_bridge").get<bool>() ? IoHop::Kind::kHostBridge : IoHop::Kind::kPciBridge,
         hop.at("id").get<std::uint64_t>()});
  }
  const auto& locality = j.at("locality");
  p.locality.id = locality.at("id").get<std::uint64_t>();
  p.locality.package = locality.at("package").get<int>();
  p.locality.numa_nodes = locality.at("numa_nodes").get<std::vector<unsigned>>();
  p.locality.cpus = locality.at("cpus").get<CpuList>();
  return p;
}

}  // namespace

std::string to_summary(const NodeTopology& topology) {
  json gpus = json::array();
  for (const auto& gpu : topology.gpus) {
    gpus.push_back({{"bus_id", gpu.bus_id},
                    {"cuda_name", gpu.cuda_name},
                    {"nvml_name", gpu.nvml_name},
                    {"model", gpu.model},
                    {"placement", placement_json(gpu.placement)}});
  }
  json nics = json::array();
  for (const auto& nic : topology.nics) {
    nics.push_back({{"bus_id", nic.bus_id},
                    {"hca", nic.hca},
                    {"netdev", nic.netdev},
                    {"port", nic.port},
                    {"placement", placement_json(nic.placement)}});
  }
  json numa = json::array();
  for (const auto& node : topology.numa_nodes) {
    numa.push_back({{"os_index", node.os_index}, {"cpus", node.cpus}});
  }
  return json{{"dtrain_topology_summary", kSummaryFormat},
              {"source", topology.source},
              {"has_io", topology.has_io},
              {"cores", topology.cores},
              {"numa_nodes", numa},
              {"gpus", gpus},
              {"nics", nics}}
      .dump();
}

NodeTopology from_summary(std::string_view text, const std::string& source) {
  try {
    const json j = json::parse(text);
    const auto format = j.at("dtrain_topology_summary").get<int>();
    if (format != kSummaryFormat) {
      throw Error(ErrorKind::kInvalidInput,
                  "topology summary " + source + " has format " + std::to_string(format) +
                      ", this dtrain reads format " + std::to_string(kSummaryFormat));
    }
    NodeTopology t;
    t.source = j.at("source").get<std::string>();
    t.has_io = j.at("has_io").get<bool>();
    t.cores = j.at("cores").get<std::vector<CpuList>>();
    for (const auto& node : j.at("numa_nodes")) {
      t.numa_nodes.push_back({node.at("os_index").get<unsigned>(), node.at("cpus").get<CpuList>()});
    }
    for (const auto& gpu : j.at("gpus")) {
      t.gpus.push_back({gpu.at("bus_id").get<std::string>(), gpu.at("cuda_name").get<std::string>(),
                        gpu.at("nvml_name").get<std::string>(), gpu.at("model").get<std::string>(),
                        placement_from(gpu.at("placement"))});
    }
    for (const auto& nic : j.at("nics")) {
      t.nics.push_back({nic.at("bus_id").get<std::string>(), nic.at("hca").get<std::string>(),
                        nic.at("netdev").get<std::string>(), nic.at("port").get<unsigned>(),
                        placement_from(nic.at("placement"))});
    }
    return t;
  } catch (const json::exception& e) {
    throw Error(ErrorKind::kInvalidInput,
                "topology summary " + source + " is not readable: " + e.what());
  }
}

}  // namespace dtrain::topology
