// SPDX-License-Identifier: Apache-2.0
#include "check/analysis.hpp"

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>

#include "bootstrap/environment.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "topology/cpu_list.hpp"

namespace dtrain::check {

namespace {

// Set per task by the plugin's binding (topology::binding_environment), so they differ
// between ranks by design and are not compared.
const std::set<std::string, std::less<>> kPerTaskVariables = {
    "CUDA_VISIBLE_DEVICES", "NCCL_IB_HCA", "UCX_NET_DEVICES", "NCCL_SOCKET_IFNAME"};
// The rest of the binding the plugin exports, reported but not an NCCL/UCX/CUDA setting.
const std::set<std::string, std::less<>> kBindingVariables = {
    "DTRAIN_CPU_LIST", "DTRAIN_GPU_BUS_IDS", "OMP_NUM_THREADS"};

// How the step was sized: Lightning refuses --ntasks without --ntasks-per-node.
const std::set<std::string, std::less<>> kLaunchShapeVariables = {"SLURM_NTASKS",
                                                                  "SLURM_NTASKS_PER_NODE"};

// Compared within each task (bootstrap::disagreement_after_dtrain).
bool is_identity_variable(const std::string& name) {
  const auto& names = bootstrap::task_identity_variables();
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool is_compared_variable(const std::string& name) {
  return name.starts_with("NCCL_") || name.starts_with("UCX_") || name.starts_with("CUDA_");
}

std::optional<std::string> variable(const RankFacts& facts, const std::string& name) {
  const auto it = facts.environment.find(name);
  if (it == facts.environment.end()) return std::nullopt;
  return it->second;
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

std::string ranks_text(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + bootstrap::format_rank_set(ranks);
}

bootstrap::RankRecord as_record(const RankFacts& facts) {
  bootstrap::RankRecord record;
  record.mpi.rank = facts.rank;
  record.hostname = facts.host;
  record.listen_endpoint = facts.listen_endpoint;
  record.listen_errno = facts.listen_errno;
  return record;
}

class Analysis {
 public:
  explicit Analysis(const CheckInput& input) : input_(input) {
    report_.ranks = input.ranks;
    report_.preflight_ran = input.preflight_ran;
  }

  CheckReport run() {
    group_nodes();
    check_plugin();
    check_ports();
    check_preflight();
    check_fingerprints();
    check_gpus();
    check_cpus();
    check_socket_interfaces();
    check_task_identity();
    check_launch_shape();
    compare_endpoint_lists();
    compare_environment();
    return std::move(report_);
  }

 private:
  void add(std::string_view id, std::string node, int rank, std::string detail) {
    report_.findings.push_back(make_finding(id, std::move(node), rank, std::move(detail)));
  }

  void group_nodes() {
    std::map<std::string, std::size_t> index;
    for (const auto& facts : input_.ranks) {
      auto [it, added] = index.emplace(facts.host, report_.nodes.size());
      if (added) report_.nodes.push_back({facts.host, {}, std::nullopt, {}});
      NodeReport& node = report_.nodes[it->second];
      node.ranks.push_back(facts.rank);
      if (facts.gpus && !node.gpus) node.gpus = facts.gpus;
      if (!facts.topology_error.empty()) node.topology_error = facts.topology_error;
    }
  }

  std::vector<const RankFacts*> ranks_on(const NodeReport& node) const {
    std::vector<const RankFacts*> on;
    for (int rank : node.ranks) on.push_back(&input_.ranks.at(static_cast<std::size_t>(rank)));
    return on;
  }

  void check_plugin() {
    std::vector<int> without;
    std::vector<std::string> nodes;
    for (const auto& node : report_.nodes) {
      bool node_listed = false;
      for (const RankFacts* facts : ranks_on(node)) {
        if (facts->plugin) continue;
        without.push_back(facts->rank);
        if (!node_listed) nodes.push_back(node.host);
        node_listed = true;
      }
    }
    report_.plugin_in_effect = without.empty() && !input_.ranks.empty();
    if (without.empty()) return;
    std::sort(without.begin(), without.end());
    const bool everywhere = without.size() == input_.ranks.size();
    add("plugin-not-in-effect", nodes.size() == 1 ? nodes.front() : "", -1,
        everywhere ? "no rank has the plugin's DTRAIN_* variables (" +
                         std::to_string(input_.ranks.size()) + " ranks on " +
                         std::to_string(report_.nodes.size()) + " node" +
                         (report_.nodes.size() == 1 ? ")" : "s)")
                   : ranks_text(without) + " on " + join(nodes, ", ") +
                         " have no DTRAIN_* variables while the other ranks have them");
  }

  void check_ports() {
    for (const auto& facts : input_.ranks) {
      for (const auto& port : facts.ports) {
        if (!port.in_use) continue;
        const bool master = port.role == "master";
        if (port.held_by_other_user) {
          add("port-held-by-another-user", facts.host, facts.rank,
              "on " + facts.host + ", " +
                  (master ? "the master port " + port.endpoint
                          : "rank " + std::to_string(facts.rank) + "'s endpoint " + port.endpoint) +
                  " is held by a process of uid " + std::to_string(port.holder_uid));
          if (!master) busy_endpoints_.insert(facts.rank);
          continue;
        }
        add(master ? "master-port-in-use" : "endpoint-port-in-use", facts.host, facts.rank,
            "on " + facts.host + ", " +
                (master ? "the master port " + port.endpoint + " (DTRAIN_MASTER_PORT)"
                        : "rank " + std::to_string(facts.rank) + "'s endpoint " + port.endpoint +
                              " (DTRAIN_CURRENT_ENDPOINT)") +
                " was held by another process before this step listened on it");
        if (!master) busy_endpoints_.insert(facts.rank);
      }
    }
  }

  void check_preflight() {
    if (!input_.preflight_ran) return;
    std::vector<bootstrap::RankRecord> records;
    for (const auto& facts : input_.ranks) records.push_back(as_record(facts));
    report_.preflight_failures = bootstrap::describe_preflight(records, input_.preflight);
    for (const auto& record : records) {
      if (record.listen_errno == 0) continue;
      const bool busy = record.listen_errno == EADDRINUSE;
      // Already reported by the port check that ran before anything listened.
      if (busy && busy_endpoints_.contains(record.mpi.rank)) continue;
      add(busy ? "endpoint-port-in-use" : "endpoint-listen-failed", record.hostname,
          record.mpi.rank, bootstrap::describe_listen_failure(record));
    }
    // One finding per kind and target: a blocked node otherwise yields one line per peer.
    std::map<std::pair<std::string, int>, std::vector<int>> sources;
    std::map<std::pair<std::string, int>, std::string> first_message;
    for (std::size_t source = 0; source < input_.preflight.size(); ++source) {
      for (const auto& outcome : input_.preflight[source]) {
        ++report_.probes;
        const auto& from = records.at(source);
        const auto& to = records.at(static_cast<std::size_t>(outcome.target));
        std::string id;
        std::string message;
        if (outcome.error == 0) {
          // A port found busy before the step listened explains who answers there.
          if (to.listen_errno == 0 || busy_endpoints_.contains(to.mpi.rank)) continue;
          id = "endpoint-answered-by-another-process";
          message = bootstrap::describe_impostor(from, to);
        } else if (to.listen_errno != 0) {
          continue;  // explained by the target's listen failure
        } else {
          id = outcome.error == ECONNREFUSED ? "connection-refused"
               : outcome.error == ETIMEDOUT  ? "connection-timed-out"
                                             : "endpoint-unreachable";
          message = bootstrap::describe_probe_failure(from, to, outcome.error);
        }
        const auto key = std::make_pair(id, outcome.target);
        sources[key].push_back(from.mpi.rank);
        first_message.emplace(key, message);
      }
    }
    for (auto& [key, from] : sources) {
      std::sort(from.begin(), from.end());
      std::string detail = first_message.at(key);
      if (from.size() > 1) {
        detail += " (" + std::to_string(from.size()) + " peers saw this: " + ranks_text(from) + ")";
      }
      const auto& target = input_.ranks.at(static_cast<std::size_t>(key.second));
      add(key.first, target.host, target.rank, detail);
    }
  }

  void check_fingerprints() {
    if (input_.ranks.empty()) return;
    std::vector<bootstrap::Fingerprint> fingerprints;
    for (const auto& facts : input_.ranks) fingerprints.push_back(facts.fingerprint);
    report_.fingerprint = fingerprints.front();
    report_.fingerprint_table = bootstrap::fingerprint_mismatch_table(fingerprints);
    if (report_.fingerprint_table.empty()) return;
    std::vector<std::string> differing;
    for (const auto& field : bootstrap::fingerprint_fields()) {
      const bool differs = std::any_of(
          fingerprints.begin(), fingerprints.end(), [&](const bootstrap::Fingerprint& f) {
            return f.*field.member != fingerprints.front().*field.member;
          });
      if (differs) differing.push_back(field.label);
    }
    Finding finding = make_finding(
        "fingerprint-mismatch", "", -1,
        "the ranks differ in: " + join(differing, ", ") + " (see the fingerprint table)");
    if (input_.allow_mismatch) finding.severity = Severity::kWarning;
    report_.findings.push_back(std::move(finding));
  }

  void check_gpus() {
    std::set<std::size_t> counts;
    for (const auto& node : report_.nodes) {
      if (!node.topology_error.empty()) {
        add("topology-unavailable", node.host, -1, node.host + ": " + node.topology_error);
      }
      if (node.gpus) counts.insert(node.gpus->size());
      std::map<std::string, std::vector<int>> holders;
      std::vector<int> bound_without_gpus;
      for (const RankFacts* facts : ranks_on(node)) {
        if (const auto ids = variable(*facts, "DTRAIN_GPU_BUS_IDS")) {
          for (const auto& id : core::split(*ids, ',')) {
            if (!id.empty()) holders[std::string(id)].push_back(facts->rank);
          }
        }
        const auto visible = variable(*facts, "CUDA_VISIBLE_DEVICES");
        if (node.gpus && node.gpus->empty() && visible && !visible->empty()) {
          bound_without_gpus.push_back(facts->rank);
        }
      }
      for (const auto& [bus_id, ranks] : holders) {
        if (ranks.size() < 2) continue;
        add("gpu-shared", node.host, -1,
            "on " + node.host + ", " + ranks_text(ranks) + " are all bound to GPU " + bus_id +
                " (DTRAIN_GPU_BUS_IDS)");
      }
      if (!bound_without_gpus.empty()) {
        add("gpu-binding-without-gpus", node.host, -1,
            "on " + node.host + ", " + ranks_text(bound_without_gpus) +
                (bound_without_gpus.size() == 1 ? " has" : " have") +
                " CUDA_VISIBLE_DEVICES set, but no GPU was found there");
      }
    }
    if (counts.size() > 1) {
      std::vector<std::string> per_node;
      for (const auto& node : report_.nodes) {
        if (node.gpus) per_node.push_back(node.host + ": " + std::to_string(node.gpus->size()));
      }
      add("gpu-count-differs", "", -1, "GPUs per node: " + join(per_node, ", "));
    }
  }

  void check_cpus() {
    for (const auto& node : report_.nodes) {
      std::vector<std::pair<int, topology::CpuList>> allowed;
      for (const RankFacts* facts : ranks_on(node)) {
        topology::CpuList cpus;
        try {
          cpus = topology::parse_cpu_list(facts->cpus_allowed, "Cpus_allowed_list");
        } catch (const Error&) {
          continue;  // unreadable affinity: nothing to compare
        }
        const auto planned_text = variable(*facts, "DTRAIN_CPU_LIST");
        if (!planned_text || planned_text->empty()) continue;
        // Only bound tasks are compared: unbound ones share every CPU by design.
        allowed.emplace_back(facts->rank, cpus);
        topology::CpuList planned;
        try {
          planned = topology::parse_cpu_list(*planned_text, "DTRAIN_CPU_LIST");
        } catch (const Error&) {
          continue;
        }
        // The plugin narrows the affinity to the planned CPUs this task may use; any CPU
        // outside the plan means that did not happen or was undone.
        if (!std::includes(planned.begin(), planned.end(), cpus.begin(), cpus.end())) {
          add("cpu-affinity-not-applied", node.host, facts->rank,
              "rank " + std::to_string(facts->rank) + " on " + node.host + " may run on CPUs " +
                  facts->cpus_allowed + ", but the plugin chose " + *planned_text +
                  " (DTRAIN_CPU_LIST)");
        }
      }
      std::set<int> sharing;
      topology::CpuList shared;
      for (std::size_t i = 0; i < allowed.size(); ++i) {
        for (std::size_t j = i + 1; j < allowed.size(); ++j) {
          topology::CpuList both;
          std::set_intersection(allowed[i].second.begin(), allowed[i].second.end(),
                                allowed[j].second.begin(), allowed[j].second.end(),
                                std::back_inserter(both));
          if (both.empty()) continue;
          sharing.insert(allowed[i].first);
          sharing.insert(allowed[j].first);
          shared.insert(shared.end(), both.begin(), both.end());
        }
      }
      if (sharing.empty()) continue;
      add("cpus-shared", node.host, -1,
          "on " + node.host + ", " + ranks_text({sharing.begin(), sharing.end()}) +
              " may run on the same CPUs (" +
              topology::format_cpu_list(topology::canonical_cpu_list(shared)) + ")");
    }
  }

  // NCCL_SOCKET_IFNAME: "^a,b" excludes, "=a,b" names exact interfaces, "a,b" are prefixes.
  static bool selects_an_interface(const std::string& setting,
                                   const std::vector<std::string>& interfaces) {
    if (setting.empty() || setting.front() == '^') return true;
    const bool exact = setting.front() == '=';
    const std::string_view names = std::string_view(setting).substr(exact ? 1 : 0);
    for (const auto wanted : core::split(names, ',')) {
      if (wanted.empty()) continue;
      for (const auto& name : interfaces) {
        if (exact ? name == wanted : name.starts_with(wanted)) return true;
      }
    }
    return false;
  }

  void check_socket_interfaces() {
    std::set<std::pair<std::string, std::string>> reported;
    for (const auto& facts : input_.ranks) {
      const auto setting = variable(facts, "NCCL_SOCKET_IFNAME");
      if (!setting || facts.interfaces.empty()) continue;
      if (selects_an_interface(*setting, facts.interfaces)) continue;
      if (!reported.emplace(facts.host, *setting).second) continue;
      add("socket-ifname-missing", facts.host, facts.rank,
          "NCCL_SOCKET_IFNAME=" + *setting + " selects none of " + facts.host + "'s interfaces (" +
              join(facts.interfaces, ", ") + ")");
    }
  }

  // One finding per node whose tasks no longer carry what dtrain set.
  void check_task_identity() {
    for (const auto& node : report_.nodes) {
      std::vector<std::string> tasks;
      int first = -1;
      for (const RankFacts* facts : ranks_on(node)) {
        if (!facts->plugin) continue;
        bootstrap::TaskVariables identity;
        for (const auto& [name, value] : facts->environment) {
          if (is_identity_variable(name)) identity.emplace(name, value);
        }
        const auto differs = bootstrap::disagreement_after_dtrain(identity);
        if (differs.empty()) continue;
        if (first < 0) first = facts->rank;
        tasks.push_back("rank " + std::to_string(facts->rank) + ": " +
                        differs.substr(0, differs.find(": ")));
      }
      if (tasks.empty()) continue;
      add("variables-changed-after-dtrain", node.host, tasks.size() == 1 ? first : -1,
          "on " + node.host + ", " + join(tasks, "; "));
    }
  }

  // Slurm sets SLURM_NTASKS_PER_NODE only when the job or step was given --ntasks-per-node.
  void check_launch_shape() {
    std::vector<int> ranks;
    std::string ntasks;
    for (const auto& facts : input_.ranks) {
      const auto count = variable(facts, "SLURM_NTASKS");
      if (!count || variable(facts, "SLURM_NTASKS_PER_NODE")) continue;
      try {
        if (core::parse_unsigned(*count, "SLURM_NTASKS", 0, UINT32_MAX) < 2) continue;
      } catch (const Error&) {
        continue;
      }
      ranks.push_back(facts.rank);
      ntasks = *count;
    }
    if (ranks.empty()) return;
    add("ntasks-without-ntasks-per-node", "", -1,
        ranks_text(ranks) + " have SLURM_NTASKS=" + ntasks +
            " and no SLURM_NTASKS_PER_NODE (the step was launched with -n alone)");
  }

  // DTRAIN_ENDPOINTS_HASH is the plugin's hash of the endpoint list: one value on every rank,
  // or the ranks connect to different peers.
  void compare_endpoint_lists() {
    auto values = values_of("DTRAIN_ENDPOINTS_HASH");
    std::erase_if(values, [](const EnvValue& v) { return !v.set; });
    if (values.size() < 2) return;
    std::sort(values.begin(), values.end(),
              [](const EnvValue& a, const EnvValue& b) { return a.value < b.value; });
    std::vector<std::string> groups;
    for (const auto& value : values) {
      groups.push_back(value.value + " on " + join(value.nodes, ",") + " (" +
                       ranks_text(value.ranks) + ")");
    }
    add("endpoint-lists-differ", "", -1, "DTRAIN_ENDPOINTS_HASH differs: " + join(groups, "; "));
  }

  // The values `name` has across the step (unset is one), each with its ranks and nodes.
  std::vector<EnvValue> values_of(const std::string& name) const {
    std::vector<EnvValue> values;
    for (const auto& node : report_.nodes) {
      for (const RankFacts* facts : ranks_on(node)) {
        const auto value = variable(*facts, name);
        auto it = std::find_if(values.begin(), values.end(), [&](const EnvValue& v) {
          return v.set == value.has_value() && v.value == value.value_or("");
        });
        if (it == values.end()) {
          values.push_back({value.has_value(), value.value_or(""), {}, {}});
          it = std::prev(values.end());
        }
        it->ranks.push_back(facts->rank);
        if (it->nodes.empty() || it->nodes.back() != node.host) it->nodes.push_back(node.host);
      }
    }
    for (auto& value : values) std::sort(value.ranks.begin(), value.ranks.end());
    return values;
  }

  void compare_environment() {
    std::set<std::string> names;
    for (const auto& facts : input_.ranks) {
      for (const auto& [name, value] : facts.environment) {
        if (is_compared_variable(name)) names.insert(name);
      }
    }
    for (const auto& name : names) {
      EnvVariableReport variable_report{name, kPerTaskVariables.contains(name), values_of(name)};
      if (!variable_report.per_task && variable_report.values.size() > 1) {
        std::vector<std::string> groups;
        for (const auto& value : variable_report.values) {
          groups.push_back((value.set ? "'" + value.value + "'" : std::string("unset")) + " on " +
                           join(value.nodes, ",") + " (" + ranks_text(value.ranks) + ")");
        }
        add("nccl-environment-differs", "", -1, name + " differs: " + join(groups, "; "));
      }
      report_.environment.push_back(std::move(variable_report));
    }
  }

  const CheckInput& input_;
  CheckReport report_;
  std::set<int> busy_endpoints_;
};

}  // namespace

bool is_reported_variable(const std::string& name) {
  return is_compared_variable(name) || kBindingVariables.contains(name) ||
         kLaunchShapeVariables.contains(name) || is_identity_variable(name) ||
         name == "DTRAIN_ENDPOINTS_HASH";
}

bool CheckReport::healthy() const {
  return std::none_of(findings.begin(), findings.end(),
                      [](const Finding& f) { return f.severity == Severity::kProblem; });
}

int CheckReport::exit_status() const {
  return healthy() ? 0 : 1;
}

CheckReport analyse(const CheckInput& input) {
  for (std::size_t i = 0; i < input.ranks.size(); ++i) {
    if (input.ranks[i].rank != static_cast<int>(i)) {
      throw Error(ErrorKind::kInternal, "dtrain-check: facts are not in rank order");
    }
  }
  return Analysis(input).run();
}

}  // namespace dtrain::check
