// SPDX-License-Identifier: Apache-2.0
#include "core/step_plan.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/parse.hpp"

namespace dtrain::core {
namespace {

std::string with_port(const std::string& addr, std::uint16_t port) {
  // IPv6 literals need brackets in host:port form.
  if (addr.find(':') != std::string::npos) return "[" + addr + "]:" + std::to_string(port);
  return addr + ":" + std::to_string(port);
}

// The part of every endpoint on a node that does not depend on the rank: "addr:" or "[addr]:".
std::vector<std::string> endpoint_prefixes(const StepPlan& plan) {
  std::vector<std::string> prefixes;
  prefixes.reserve(plan.node_addresses.size());
  for (const auto& addr : plan.node_addresses) {
    prefixes.push_back(addr.find(':') != std::string::npos ? "[" + addr + "]:" : addr + ":");
  }
  return prefixes;
}

std::vector<std::string> port_texts(const StepPlan& plan) {
  std::vector<std::string> texts;
  texts.reserve(plan.ports.endpoint_ports.size());
  for (const auto port : plan.ports.endpoint_ports) texts.push_back(std::to_string(port));
  return texts;
}

// Endpoint r quoted as JSON needs escaping only where its address holds a quote, a backslash
// or a byte outside printable ASCII (at most a malformed SLURM_NODE_ALIASES entry): each node's
// prefix is escaped once, by the JSON library where it needs it, and the ranks' strings are
// assembled from those pieces: a library JSON array of 100,000 strings cost about 10 ms per node.
std::string tf_cluster_json(const StepPlan& plan, const std::vector<std::string>& prefixes,
                            const std::vector<std::string>& ports) {
  std::vector<std::string> escaped;
  escaped.reserve(prefixes.size());
  for (const auto& prefix : prefixes) {
    const bool plain = std::all_of(prefix.begin(), prefix.end(), [](char c) {
      return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\';
    });
    if (plain) {
      escaped.push_back(prefix);
    } else {
      const std::string quoted = nlohmann::json(prefix).dump();
      escaped.push_back(quoted.substr(1, quoted.size() - 2));
    }
  }
  std::string out = R"({"worker":[)";
  out.reserve(plan.endpoints.size() + 3 * static_cast<std::size_t>(plan.layout.world_size()) + 16);
  for (std::uint32_t r = 0; r < plan.layout.world_size(); ++r) {
    const auto& place = plan.layout.ranks[r];
    if (r) out += ',';
    out += '"';
    out += escaped[place.node];
    out += ports[place.local_rank];
    out += '"';
  }
  out += "]}";
  return out;
}

std::string tf_config_for(const StepPlan& plan, std::uint32_t rank) {
  static constexpr std::string_view kHead = R"({"cluster":)";
  static constexpr std::string_view kTask = R"(,"task":{"type":"worker","index":)";
  const std::string index = std::to_string(rank);
  std::string config;
  config.reserve(kHead.size() + plan.tf_cluster.size() + kTask.size() + index.size() + 2);
  config.append(kHead).append(plan.tf_cluster).append(kTask).append(index).append("}}");
  return config;
}

}  // namespace

std::map<std::string, std::string> parse_node_aliases(std::string_view text) {
  std::map<std::string, std::string> aliases;
  require_length(text, "SLURM_NODE_ALIASES", 1 << 20);
  if (text.empty() || text == "(null)") return aliases;
  for (const auto entry : split(text, ',')) {
    // name:addr:host, where addr may itself hold colons (IPv6).
    const auto first = entry.find(':');
    const auto last = entry.rfind(':');
    if (first == std::string_view::npos || first == last || first == 0 || last == first + 1) {
      throw_invalid("SLURM_NODE_ALIASES entry " + quote_for_error(entry) +
                    " is not name:address:host");
    }
    std::string address(entry.substr(first + 1, last - first - 1));
    if (address.size() > 2 && address.front() == '[' && address.back() == ']') {
      address = address.substr(1, address.size() - 2);
    }
    aliases[std::string(entry.substr(0, first))] = std::move(address);
  }
  return aliases;
}

bool is_loopback_address(const std::string& address) {
  return address.rfind("127.", 0) == 0 || address == "::1" || address.rfind("::ffff:127.", 0) == 0;
}

StepPlan plan_step(const StepInputs& inputs, const PluginConfig& config,
                   const FrameworkSet& frameworks, const Resolver& resolve,
                   const HostsLine& hosts_line) {
  StepPlan plan;
  plan.frameworks = frameworks;
  plan.layout = derive_layout(inputs.spec);
  if (inputs.node_id >= plan.layout.node_count()) {
    throw Error(ErrorKind::kMismatch, "this node's index " + std::to_string(inputs.node_id) +
                                          " (SLURM_NODEID) is outside the step's " +
                                          std::to_string(plan.layout.node_count()) + " nodes");
  }
  plan.node = inputs.node_id;
  if (inputs.local_ranks) check_local_ranks(plan.layout, plan.node, *inputs.local_ranks);

  const auto aliases = parse_node_aliases(inputs.node_aliases);
  const std::uint32_t node_count = plan.layout.node_count();
  const bool resolve_every_node =
      config.address_mode == AddressMode::kAddress && node_count <= config.ip_max_nodes;
  plan.names_past_ip_max_nodes =
      config.address_mode == AddressMode::kAddress && !resolve_every_node;
  auto alias_of = [&](const std::string& host) -> const std::string* {
    if (!config.host_suffix.empty()) return nullptr;
    const auto alias = aliases.find(host);
    return alias != aliases.end() ? &alias->second : nullptr;
  };
  auto address_of = [&](std::uint32_t node) {
    const auto& host = plan.layout.hosts[node];
    const std::string name = host + config.host_suffix;
    const std::string* alias = alias_of(host);
    std::string address = alias ? *alias : resolve(name);
    if (node_count > 1 && !config.allow_loopback && is_loopback_address(address)) {
      const std::string line = hosts_line ? hosts_line(name) : std::string();
      throw_invalid(
          "node " + name + " resolves to the loopback address " + address + " on " +
          plan.layout.hosts[plan.node] + " (" +
          (line.empty() ? std::string("from the resolver")
                        : "from its hosts file: '" + line + "'") +
          "), while the step's other nodes reach it at its real address: the endpoint lists "
          "would differ between nodes. Map " +
          name +
          " to its cluster address in /etc/hosts (Debian's and Ubuntu's installers write "
          "'127.0.1.1 <hostname>'), choose the cluster network with suffix=, or set "
          "loopback=allow in plugstack.conf where every node really is this machine");
    }
    return address;
  };

  plan.node_addresses.reserve(node_count);
  for (std::uint32_t node = 0; node < node_count; ++node) {
    if (resolve_every_node) {
      plan.node_addresses.push_back(address_of(node));
      continue;
    }
    // Past ip_max_nodes an address Slurm gives costs no lookup, so it is listed; address=name
    // lists names only, as it always has.
    const auto& host = plan.layout.hosts[node];
    const std::string* alias = plan.names_past_ip_max_nodes ? alias_of(host) : nullptr;
    plan.node_addresses.push_back(alias ? *alias : host + config.host_suffix);
  }
  const std::uint32_t master_node = plan.layout.ranks[0].node;
  if (plan.names_past_ip_max_nodes) {
    plan.local_address = address_of(plan.node);
    plan.master_addr = master_node == plan.node ? plan.local_address : address_of(master_node);
    plan.step_warnings.push_back(
        "this step has " + std::to_string(node_count) +
        " nodes, more than ip_max_nodes=" + std::to_string(config.ip_max_nodes) +
        " in plugstack.conf: its endpoint lists (DTRAIN_ENDPOINTS, PADDLE_TRAINER_ENDPOINTS, "
        "TF_CONFIG) carry node names, which the frameworks resolve, instead of addresses, so that "
        "no node resolves every other node's name; MASTER_ADDR is still rank 0's node's address");
  } else {
    plan.local_address = plan.node_addresses[plan.node];
    plan.master_addr = plan.node_addresses[master_node];
  }

  std::uint32_t max_local = 0;
  for (const auto& ranks : plan.layout.node_ranks) {
    max_local = std::max(max_local, static_cast<std::uint32_t>(ranks.size()));
  }
  plan.ports = plan_ports(config.ports, config.port_block, inputs.job_id, inputs.step_id, max_local,
                          inputs.reserved_ports);
  if (!plan.ports.note.empty()) plan.step_warnings.push_back(plan.ports.note);

  // Built from per-node and per-port pieces: a 100,000-rank list is 1.6 MB.
  const auto prefixes = endpoint_prefixes(plan);
  const auto ports = port_texts(plan);
  std::size_t list_bytes = 0;
  for (const auto& place : plan.layout.ranks) {
    list_bytes += prefixes[place.node].size() + ports[place.local_rank].size() + 1;
  }
  std::string& endpoints = plan.endpoints;
  endpoints.reserve(list_bytes);
  for (std::uint32_t r = 0; r < plan.layout.world_size(); ++r) {
    const auto& place = plan.layout.ranks[r];
    if (r) endpoints += ',';
    endpoints += prefixes[place.node];
    endpoints += ports[place.local_rank];
  }
  plan.endpoints_hash = endpoints_hash(plan.endpoints);
  if (frameworks.tf) plan.tf_cluster = tf_cluster_json(plan, prefixes, ports);
  return plan;
}

std::string endpoint_of(const StepPlan& plan, std::uint32_t rank) {
  const auto& place = plan.layout.ranks.at(rank);
  return with_port(plan.node_addresses[place.node], plan.ports.endpoint_ports[place.local_rank]);
}

bool one_task_per_node(const StepPlan& plan) {
  return plan.layout.world_size() == plan.layout.node_count();
}

std::vector<EnvVar> rank_environment(const StepPlan& plan, std::uint32_t global_rank) {
  const auto& place = plan.layout.ranks.at(global_rank);
  const std::string rank = std::to_string(global_rank);
  const std::string world = std::to_string(plan.layout.world_size());
  const std::string local = std::to_string(place.local_rank);
  const std::string local_world = std::to_string(plan.layout.local_world_size(place.node));
  const std::string node_rank = std::to_string(place.node);
  const std::string nnodes = std::to_string(plan.layout.node_count());
  const std::string master_port = std::to_string(plan.ports.master);
  const std::string current = endpoint_of(plan, global_rank);

  // Each value is copied into its variable once: in a large step the endpoint lists and
  // TF_CONFIG are megabytes, for every task of the node.
  std::vector<EnvVar> env;
  env.reserve(40);  // every name below; node_environment adds the binding's
  const auto add = [&env](const char* name, std::string value) {
    env.push_back({name, std::move(value)});
  };
  add("DTRAIN_RANK", rank);
  add("DTRAIN_WORLD_SIZE", world);
  add("DTRAIN_LOCAL_RANK", local);
  add("DTRAIN_LOCAL_WORLD_SIZE", local_world);
  add("DTRAIN_NODE_RANK", node_rank);
  add("DTRAIN_NNODES", nnodes);
  add("DTRAIN_MASTER_ADDR", plan.master_addr);
  add("DTRAIN_MASTER_PORT", master_port);
  add("DTRAIN_CURRENT_ENDPOINT", current);
  add("DTRAIN_ENDPOINTS", plan.endpoints);
  add("DTRAIN_ENDPOINTS_HASH", plan.endpoints_hash);
  add("DTRAIN_FRAMEWORKS", to_string(plan.frameworks));
  if (plan.frameworks.torch) {
    add("RANK", rank);
    add("WORLD_SIZE", world);
    add("LOCAL_RANK", local);
    add("LOCAL_WORLD_SIZE", local_world);
    add("GROUP_RANK", node_rank);
    add("GROUP_WORLD_SIZE", nnodes);
    add("ROLE_RANK", rank);
    add("ROLE_WORLD_SIZE", world);
    add("MASTER_ADDR", plan.master_addr);
    add("MASTER_PORT", master_port);
    if (one_task_per_node(plan)) {
      // torchrun takes each option's default from PET_<OPTION> (torch/distributed/run.py with
      // argparse_util.env): started once per node with no arguments, it forms the step's world
      // with its static rendezvous on rank 0's node at the master port.
      add("PET_NNODES", nnodes);
      add("PET_NODE_RANK", node_rank);
      add("PET_MASTER_ADDR", plan.master_addr);
      add("PET_MASTER_PORT", master_port);
    }
  }
  if (plan.frameworks.paddle) {
    add("PADDLE_TRAINER_ID", rank);
    add("PADDLE_TRAINERS_NUM", world);
    add("PADDLE_TRAINER_ENDPOINTS", plan.endpoints);
    add("PADDLE_CURRENT_ENDPOINT", current);
    add("PADDLE_RANK_IN_NODE", local);
    add("PADDLE_LOCAL_RANK", local);
    add("PADDLE_GLOBAL_RANK", rank);
    add("PADDLE_GLOBAL_SIZE", world);
    add("PADDLE_LOCAL_SIZE", local_world);
    add("PADDLE_NNODES", nnodes);
    add("PADDLE_MASTER", with_port(plan.master_addr, plan.ports.master));
  }
  if (plan.frameworks.tf) add("TF_CONFIG", tf_config_for(plan, global_rank));
  if (plan.frameworks.jax) {
    // jax.distributed.initialize() takes the coordinator from JAX_COORDINATOR_ADDRESS (process
    // 0 serves it on that port) and the process count and id from SLURM_NTASKS and SLURM_PROCID
    // (jax/_src/clusters/slurm_cluster.py), which are the step's world and rank.
    add("JAX_COORDINATOR_ADDRESS", with_port(plan.master_addr, plan.ports.master));
  }
  return env;
}

}  // namespace dtrain::core
