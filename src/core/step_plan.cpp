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

std::string tf_cluster_json(const StepPlan& plan) {
  nlohmann::json workers = nlohmann::json::array();
  for (std::uint32_t r = 0; r < plan.layout.world_size(); ++r)
    workers.push_back(endpoint_of(plan, r));
  return nlohmann::json{{"worker", std::move(workers)}}.dump();
}

std::string tf_config_for(const StepPlan& plan, std::uint32_t rank) {
  return R"({"cluster":)" + plan.tf_cluster + R"(,"task":{"type":"worker","index":)" +
         std::to_string(rank) + "}}";
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
  plan.node_addresses.reserve(plan.layout.node_count());
  for (const auto& host : plan.layout.hosts) {
    const std::string name = host + config.host_suffix;
    const auto alias = config.host_suffix.empty() ? aliases.find(host) : aliases.end();
    if (config.address_mode == AddressMode::kName) {
      plan.node_addresses.push_back(name);
    } else {
      plan.node_addresses.push_back(alias != aliases.end() ? alias->second : resolve(name));
    }
    const auto& address = plan.node_addresses.back();
    if (config.address_mode == AddressMode::kAddress && plan.layout.node_count() > 1 &&
        !config.allow_loopback && is_loopback_address(address)) {
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
  }

  std::uint32_t max_local = 0;
  for (const auto& ranks : plan.layout.node_ranks) {
    max_local = std::max(max_local, static_cast<std::uint32_t>(ranks.size()));
  }
  plan.ports = plan_ports(config.ports, config.port_block, inputs.job_id, inputs.step_id, max_local,
                          inputs.reserved_ports);
  if (!plan.ports.note.empty()) plan.step_warnings.push_back(plan.ports.note);

  plan.master_addr = plan.node_addresses[plan.layout.ranks[0].node];
  std::string& endpoints = plan.endpoints;
  endpoints.reserve(static_cast<std::size_t>(plan.layout.world_size()) * 22);
  for (std::uint32_t r = 0; r < plan.layout.world_size(); ++r) {
    if (r) endpoints += ',';
    endpoints += endpoint_of(plan, r);
  }
  plan.endpoints_hash = endpoints_hash(plan.endpoints);
  if (frameworks.tf) plan.tf_cluster = tf_cluster_json(plan);
  return plan;
}

std::string endpoint_of(const StepPlan& plan, std::uint32_t rank) {
  const auto& place = plan.layout.ranks.at(rank);
  return with_port(plan.node_addresses[place.node], plan.ports.endpoint_ports[place.local_rank]);
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

  std::vector<EnvVar> env = {
      {"DTRAIN_RANK", rank},
      {"DTRAIN_WORLD_SIZE", world},
      {"DTRAIN_LOCAL_RANK", local},
      {"DTRAIN_LOCAL_WORLD_SIZE", local_world},
      {"DTRAIN_NODE_RANK", node_rank},
      {"DTRAIN_NNODES", nnodes},
      {"DTRAIN_MASTER_ADDR", plan.master_addr},
      {"DTRAIN_MASTER_PORT", master_port},
      {"DTRAIN_CURRENT_ENDPOINT", current},
      {"DTRAIN_ENDPOINTS", plan.endpoints},
      {"DTRAIN_ENDPOINTS_HASH", plan.endpoints_hash},
      {"DTRAIN_FRAMEWORKS", to_string(plan.frameworks)},
  };
  if (plan.frameworks.torch) {
    env.insert(env.end(), {{"RANK", rank},
                           {"WORLD_SIZE", world},
                           {"LOCAL_RANK", local},
                           {"LOCAL_WORLD_SIZE", local_world},
                           {"GROUP_RANK", node_rank},
                           {"GROUP_WORLD_SIZE", nnodes},
                           {"ROLE_RANK", rank},
                           {"ROLE_WORLD_SIZE", world},
                           {"MASTER_ADDR", plan.master_addr},
                           {"MASTER_PORT", master_port}});
  }
  if (plan.frameworks.paddle) {
    env.insert(env.end(), {{"PADDLE_TRAINER_ID", rank},
                           {"PADDLE_TRAINERS_NUM", world},
                           {"PADDLE_TRAINER_ENDPOINTS", plan.endpoints},
                           {"PADDLE_CURRENT_ENDPOINT", current},
                           {"PADDLE_RANK_IN_NODE", local},
                           {"PADDLE_LOCAL_RANK", local},
                           {"PADDLE_GLOBAL_RANK", rank},
                           {"PADDLE_GLOBAL_SIZE", world},
                           {"PADDLE_LOCAL_SIZE", local_world},
                           {"PADDLE_NNODES", nnodes},
                           {"PADDLE_MASTER", with_port(plan.master_addr, plan.ports.master)}});
  }
  if (plan.frameworks.tf) env.push_back({"TF_CONFIG", tf_config_for(plan, global_rank)});
  return env;
}

}  // namespace dtrain::core
