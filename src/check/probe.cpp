// SPDX-License-Identifier: Apache-2.0
#include "check/probe.hpp"

#include <net/if.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "bootstrap/endpoints.hpp"
#include "bootstrap/environment.hpp"
#include "check/analysis.hpp"
#include "core/error.hpp"
#include "core/net_io.hpp"
#include "core/parse.hpp"
#include "topology/affinity_io.hpp"
#include "topology/load_io.hpp"

extern char** environ;

namespace dtrain::check {

namespace {

std::vector<std::string> network_interfaces() {
  std::vector<std::string> names;
  if (struct if_nameindex* list = if_nameindex()) {
    for (const struct if_nameindex* entry = list; entry->if_index != 0; ++entry) {
      names.emplace_back(entry->if_name);
    }
    if_freenameindex(list);
  }
  return names;
}

PortFacts check_port(const std::string& role, const bootstrap::Endpoint& endpoint) {
  PortFacts port{role, bootstrap::to_string(endpoint), false};
  try {
    const auto address = core::resolve_host(endpoint.host);
    port.in_use = core::port_in_use(address, endpoint.port);
    if (const auto holder = core::listener_uid(address, endpoint.port);
        port.in_use && holder && *holder != geteuid()) {
      port.held_by_other_user = true;
      port.holder_uid = *holder;
    }
  } catch (const Error&) {
    // An unresolvable endpoint is reported by the preflight, which cannot reach it either.
  }
  return port;
}

void check_ports(RankFacts& facts, const bootstrap::DtrainEnv& env) {
  if (!env.present) return;
  try {
    facts.ports.push_back(check_port(
        "endpoint", bootstrap::parse_endpoint(env.current_endpoint, "DTRAIN_CURRENT_ENDPOINT")));
  } catch (const Error&) {
    // The bootstrap names a malformed DTRAIN_CURRENT_ENDPOINT and fails.
  }
  // The master port is opened by rank 0 (torch's TCPStore), on rank 0's node.
  const auto master_addr = bootstrap::process_env("DTRAIN_MASTER_ADDR");
  const auto master_port = bootstrap::process_env("DTRAIN_MASTER_PORT");
  if (env.rank != 0 || !master_addr || !master_port) return;
  try {
    const auto port = core::parse_unsigned(*master_port, "DTRAIN_MASTER_PORT", 1, 65535);
    facts.ports.push_back(
        check_port("master", bootstrap::Endpoint{*master_addr, static_cast<std::uint16_t>(port)}));
  } catch (const Error&) {
    // A malformed master port is the plugin's bug; the framework reports it when it starts.
  }
}

}  // namespace

RankFacts probe_rank() {
  RankFacts facts;
  bootstrap::DtrainEnv env;
  try {
    env = bootstrap::read_dtrain_env(bootstrap::process_env, bootstrap::read_whole_file);
  } catch (const Error&) {
    // Some but not all variables: the bootstrap names the missing ones and stops.
    env.present = true;
  }
  facts.plugin = env.present;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const auto equals = text.find('=');
    if (equals == std::string_view::npos) continue;
    std::string name(text.substr(0, equals));
    if (is_reported_variable(name)) facts.environment[name] = std::string(text.substr(equals + 1));
  }
  try {
    facts.cpus_allowed = topology::format_cpu_list(topology::current_affinity());
  } catch (const Error&) {
    facts.cpus_allowed.clear();
  }
  facts.interfaces = network_interfaces();
  check_ports(facts, env);
  return facts;
}

void probe_node(RankFacts& facts) {
  try {
    const auto topology = topology::load_topology("");
    std::vector<GpuFacts> gpus;
    for (const auto& gpu : topology.gpus) gpus.push_back({gpu.bus_id, gpu.model});
    facts.gpus = std::move(gpus);
    if (!topology.has_io) {
      facts.topology_error = "hwloc reported no PCI devices, so GPUs cannot be seen";
      facts.gpus.reset();
    }
  } catch (const Error& error) {
    facts.topology_error = error.what();
  }
}

}  // namespace dtrain::check
