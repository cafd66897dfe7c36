// SPDX-License-Identifier: Apache-2.0
#include "topology/binding.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

#include "core/error.hpp"
#include "core/parse.hpp"
#include "topology/pci_address.hpp"

namespace dtrain::topology {
namespace {

constexpr unsigned kMaxLocalTasks = 4096;
constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

std::vector<std::size_t> pci_sorted_indices(const auto& devices) {
  std::vector<std::size_t> order(devices.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return pci_order_less(devices[a].bus_id, devices[b].bus_id);
  });
  return order;
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string text;
  for (const auto& item : items) {
    if (!text.empty()) text += separator;
    text += item;
  }
  return text;
}

// Indices into topology.gpus of the GPUs the step may use, in PCI order.
std::vector<std::size_t> select_gpus(const NodeTopology& topology, const BindingRequest& request) {
  const std::vector<std::size_t> all = pci_sorted_indices(topology.gpus);
  if (request.allowed_gpu_bus_ids && request.allowed_gpu_indices) {
    throw_invalid(
        "binding request gives the allowed GPUs both as bus ids and as indices; give one");
  }
  std::vector<std::size_t> selected;
  if (request.allowed_gpu_bus_ids) {
    for (const std::string& text : *request.allowed_gpu_bus_ids) {
      const std::string bus_id = normalize_bus_id(text, "allowed GPU bus id");
      const auto found = std::find_if(
          all.begin(), all.end(), [&](std::size_t g) { return topology.gpus[g].bus_id == bus_id; });
      if (found == all.end()) {
        std::vector<std::string> known;
        for (std::size_t g : all) known.push_back(topology.gpus[g].bus_id);
        throw Error(ErrorKind::kMismatch,
                    "GPU " + bus_id + " allowed for this step is not in topology " +
                        topology.source +
                        " (its GPUs: " + (known.empty() ? "none" : join(known, ", ")) +
                        "); the topology XML must describe this node");
      }
      selected.push_back(*found);
    }
  } else if (request.allowed_gpu_indices) {
    for (unsigned index : *request.allowed_gpu_indices) {
      if (index >= all.size()) {
        throw Error(ErrorKind::kMismatch, "GPU index " + std::to_string(index) +
                                              " allowed for this step is out of range: "
                                              "topology " +
                                              topology.source + " has " +
                                              std::to_string(all.size()) +
                                              " GPUs; the topology XML must describe this node");
      }
      selected.push_back(all[index]);
    }
  } else {
    return all;
  }
  std::sort(selected.begin(), selected.end(), [&](std::size_t a, std::size_t b) {
    return pci_order_less(topology.gpus[a].bus_id, topology.gpus[b].bus_id);
  });
  selected.erase(std::unique(selected.begin(), selected.end()), selected.end());
  return selected;
}

// GPUs of one NUMA domain kept together; domains ordered by their first bus id.
std::vector<std::size_t> domain_major(const NodeTopology& topology,
                                      const std::vector<std::size_t>& pci_order) {
  std::vector<const CpuList*> domains;
  std::vector<std::vector<std::size_t>> members;
  for (std::size_t g : pci_order) {
    const CpuList& key = topology.gpus[g].placement.locality.cpus;
    auto it =
        std::find_if(domains.begin(), domains.end(), [&](const CpuList* d) { return *d == key; });
    if (it == domains.end()) {
      domains.push_back(&key);
      members.emplace_back();
      it = domains.end() - 1;
    }
    members[static_cast<std::size_t>(it - domains.begin())].push_back(g);
  }
  std::vector<std::size_t> order;
  for (const auto& group : members) order.insert(order.end(), group.begin(), group.end());
  return order;
}

// Equal contiguous shares of a CPU domain: whole cores while there are enough, else PUs.
std::vector<CpuList> split_domain(const NodeTopology& topology, const CpuList& domain,
                                  std::size_t shares, const std::string& label,
                                  std::vector<std::string>& warnings) {
  std::vector<CpuList> units;
  for (const CpuList& core : topology.cores) {
    CpuList unit;
    for (unsigned pu : core) {
      if (std::binary_search(domain.begin(), domain.end(), pu)) unit.push_back(pu);
    }
    if (!unit.empty()) units.push_back(std::move(unit));
  }
  if (units.size() < shares) {
    std::vector<CpuList> pus;
    for (const CpuList& unit : units) {
      for (unsigned pu : unit) pus.push_back({pu});
    }
    units = std::move(pus);
  }
  std::vector<CpuList> result(shares);
  if (units.empty()) return result;
  const std::size_t count = units.size();
  if (count < shares) {
    warnings.push_back(std::to_string(shares) + " tasks share the " + std::to_string(count) +
                       " CPUs of " + label + "; some tasks get the same CPU");
    for (std::size_t i = 0; i < shares; ++i) result[i] = units[i * count / shares];
    return result;
  }
  for (std::size_t i = 0; i < shares; ++i) {
    for (std::size_t u = i * count / shares; u < (i + 1) * count / shares; ++u) {
      result[i].insert(result[i].end(), units[u].begin(), units[u].end());
    }
  }
  return result;
}

CpuList all_cpus(const NodeTopology& topology) {
  CpuList cpus;
  for (const CpuList& core : topology.cores) cpus.insert(cpus.end(), core.begin(), core.end());
  return canonical_cpu_list(std::move(cpus));
}

void describe_cpus(const NodeTopology& topology, TaskBinding& task) {
  task.cpus = canonical_cpu_list(std::move(task.cpus));
  const auto has = [&](unsigned pu) {
    return std::binary_search(task.cpus.begin(), task.cpus.end(), pu);
  };
  task.cores = static_cast<unsigned>(std::count_if(
      topology.cores.begin(), topology.cores.end(),
      [&](const CpuList& core) { return std::any_of(core.begin(), core.end(), has); }));
  for (const NumaNode& node : topology.numa_nodes) {
    if (std::any_of(node.cpus.begin(), node.cpus.end(), has))
      task.numa_nodes.push_back(node.os_index);
  }
}

void plan_cpu_only(const NodeTopology& topology, BindingPlan& plan) {
  std::vector<CpuList> domains;
  for (const NumaNode& node : topology.numa_nodes) {
    if (!node.cpus.empty()) domains.push_back(node.cpus);
  }
  if (domains.empty()) domains.push_back(all_cpus(topology));
  const std::size_t tasks = plan.tasks.size();
  const std::size_t count = domains.size();
  if (tasks <= count) {
    for (std::size_t t = 0; t < tasks; ++t) {
      for (std::size_t d = t * count / tasks; d < (t + 1) * count / tasks; ++d) {
        plan.tasks[t].cpus.insert(plan.tasks[t].cpus.end(), domains[d].begin(), domains[d].end());
      }
    }
    return;
  }
  // Each task goes to the domain holding the middle of its share of all cores, so domains get
  // tasks in proportion to their cores and no task straddles two domains.
  std::vector<std::size_t> cores_in(count, 0);
  for (std::size_t d = 0; d < count; ++d) {
    for (const CpuList& core : topology.cores) {
      if (std::binary_search(domains[d].begin(), domains[d].end(), core.front())) ++cores_in[d];
    }
  }
  const std::size_t total = std::accumulate(cores_in.begin(), cores_in.end(), std::size_t{0});
  std::vector<std::vector<std::size_t>> tasks_in(count);
  for (std::size_t t = 0; t < tasks; ++t) {
    const std::size_t middle = total * (2 * t + 1) / (2 * tasks);
    std::size_t d = 0;
    std::size_t domain_end = cores_in[0];  // flat index one past domain d's cores
    while (middle >= domain_end && d + 1 < count) domain_end += cores_in[++d];
    tasks_in[d].push_back(t);
  }
  for (std::size_t d = 0; d < count; ++d) {
    if (tasks_in[d].empty()) continue;
    const auto shares = split_domain(topology, domains[d], tasks_in[d].size(),
                                     "CPU domain " + format_cpu_list(domains[d]), plan.warnings);
    for (std::size_t i = 0; i < tasks_in[d].size(); ++i)
      plan.tasks[tasks_in[d][i]].cpus = shares[i];
  }
}

struct NicAssignment {
  std::size_t nic = kNone;  // index into topology.nics
  Closeness closeness = Closeness::kSys;
};

int nic_distance(const Placement& gpu, const Placement& nic) {
  const Closeness closeness = classify(gpu, nic);
  // Within SYS, a NIC on the GPU's own socket still beats one across the socket interconnect.
  const bool other_package =
      closeness == Closeness::kSys && gpu.locality.package != nic.locality.package;
  return static_cast<int>(closeness) * 2 + (other_package ? 1 : 0);
}

// Closest NIC per GPU; equally close NICs are shared out by rounds of bipartite matching
// (Kuhn's augmenting paths, candidates tried by load, then PCI order), so a NIC serves a
// second GPU only when every equally close NIC already serves one.
// gpu -> the NICs at its best distance, in PCI order. HCAs only, on nodes that have any.
std::map<std::size_t, std::vector<std::size_t>> closest_nics(const NodeTopology& topology,
                                                             const std::vector<std::size_t>& gpus) {
  const std::vector<std::size_t> nic_order = pci_sorted_indices(topology.nics);
  const bool have_hca = std::any_of(topology.nics.begin(), topology.nics.end(),
                                    [](const Nic& n) { return !n.hca.empty(); });
  std::vector<std::size_t> pool;
  for (std::size_t n : nic_order) {
    if (!have_hca || !topology.nics[n].hca.empty()) pool.push_back(n);
  }
  std::map<std::size_t, std::vector<std::size_t>> candidates;
  if (pool.empty()) return candidates;
  for (std::size_t g : gpus) {
    int best = std::numeric_limits<int>::max();
    for (std::size_t n : pool) {
      const int d = nic_distance(topology.gpus[g].placement, topology.nics[n].placement);
      if (d < best) {
        best = d;
        candidates[g].clear();
      }
      if (d == best) candidates[g].push_back(n);
    }
  }
  return candidates;
}

// The node-wide NCCL_IB_HCA set: every NIC closest to some GPU of the node, whether or not the
// step holds that GPU. NCCL wants one HCA list on all ranks (PXN relays through a peer GPU's
// NIC), and a list independent of the step's GPUs is also the same on every node of a model;
// NICs no GPU is closest to (storage, management) stay out.
std::vector<NicChoice> node_fabric_nics(const NodeTopology& topology) {
  std::vector<std::size_t> all_gpus(topology.gpus.size());
  for (std::size_t g = 0; g < all_gpus.size(); ++g) all_gpus[g] = g;
  std::vector<std::size_t> used;
  for (const auto& [gpu, nics] : closest_nics(topology, all_gpus)) {
    used.insert(used.end(), nics.begin(), nics.end());
  }
  std::vector<NicChoice> out;
  for (std::size_t n : pci_sorted_indices(topology.nics)) {
    if (std::find(used.begin(), used.end(), n) == used.end()) continue;
    const Nic& nic = topology.nics[n];
    out.push_back({nic.bus_id, nic.hca, nic.netdev, nic.port, Closeness::kSys});
  }
  return out;
}

std::map<std::size_t, NicAssignment> choose_nics(const NodeTopology& topology,
                                                 const std::vector<std::size_t>& gpus) {
  std::map<std::size_t, NicAssignment> result;
  auto candidates = closest_nics(topology, gpus);
  if (candidates.empty()) return result;
  std::map<std::size_t, unsigned> load;
  std::vector<std::size_t> pending = gpus;
  while (!pending.empty()) {
    std::map<std::size_t, std::size_t> owner;  // nic -> gpu, this round
    std::map<std::size_t, std::vector<std::size_t>> tries;
    for (std::size_t g : pending) {
      tries[g] = candidates[g];
      std::stable_sort(tries[g].begin(), tries[g].end(),
                       [&](std::size_t a, std::size_t b) { return load[a] < load[b]; });
    }
    std::map<std::size_t, bool> visited;
    auto augment = [&](auto& self, std::size_t g) -> bool {
      // A free NIC first, so GPUs keep the NIC they would pick alone (mlx5_0 for GPU0).
      for (std::size_t n : tries[g]) {
        if (!visited[n] && owner.count(n) == 0) {
          visited[n] = true;
          owner[n] = g;
          return true;
        }
      }
      for (std::size_t n : tries[g]) {
        if (visited[n]) continue;
        visited[n] = true;
        auto it = owner.find(n);
        if (it == owner.end() || self(self, it->second)) {
          owner[n] = g;
          return true;
        }
      }
      return false;
    };
    for (std::size_t g : pending) {
      visited.clear();
      augment(augment, g);
    }
    for (const auto& [n, g] : owner) {
      result[g] = {n, classify(topology.gpus[g].placement, topology.nics[n].placement)};
      ++load[n];
    }
    std::erase_if(pending, [&](std::size_t g) { return result.count(g) != 0; });
  }
  return result;
}

std::string join_numbers(const std::vector<unsigned>& numbers) {
  std::string text;
  for (std::size_t i = 0; i < numbers.size(); ++i) {
    if (i != 0) text += ',';
    text += std::to_string(numbers[i]);
  }
  return text;
}

// CUDA_VISIBLE_DEVICES and the device indices of every task (see BindingRequest::node_view). The
// node view needs one GPU per task and no GPU shared: then the list is the same for every task,
// and CUDA's device `local_rank` is the task's own.
void assign_views(BindingPlan& plan, bool node_view) {
  std::vector<unsigned> one_each;
  for (const TaskBinding& task : plan.tasks) {
    if (task.gpu_numbers.size() != 1) break;
    one_each.push_back(task.gpu_numbers.front());
  }
  std::vector<unsigned> distinct = one_each;
  std::sort(distinct.begin(), distinct.end());
  const bool node = node_view && one_each.size() == plan.tasks.size() &&
                    std::adjacent_find(distinct.begin(), distinct.end()) == distinct.end();
  const std::string node_list = node ? join_numbers(one_each) : std::string();
  for (TaskBinding& task : plan.tasks) {
    task.device_indices.clear();
    if (node) {
      task.cuda_visible_devices = node_list;
      task.device_indices.push_back(task.local_rank);
      continue;
    }
    task.cuda_visible_devices = join_numbers(task.gpu_numbers);
    for (unsigned i = 0; i < task.gpu_numbers.size(); ++i) task.device_indices.push_back(i);
  }
}

void plan_gpus(const NodeTopology& topology, const BindingRequest& request,
               const std::vector<std::size_t>& selected, BindingPlan& plan) {
  const std::vector<std::size_t> order = domain_major(topology, selected);
  const std::size_t gpus = order.size();
  const std::size_t tasks = plan.tasks.size();
  std::vector<std::vector<std::size_t>> gpus_of(tasks);
  if (tasks <= gpus) {
    std::size_t next = 0;
    for (std::size_t t = 0; t < tasks; ++t) {
      const std::size_t n = gpus / tasks + (t < gpus % tasks ? 1 : 0);
      gpus_of[t].assign(order.begin() + static_cast<std::ptrdiff_t>(next),
                        order.begin() + static_cast<std::ptrdiff_t>(next + n));
      next += n;
    }
  } else {
    std::size_t t = 0;
    for (std::size_t i = 0; i < gpus; ++i) {
      const std::size_t n = tasks / gpus + (i < tasks % gpus ? 1 : 0);
      for (std::size_t k = 0; k < n; ++k) gpus_of[t++].push_back(order[i]);
    }
  }

  // CUDA_VISIBLE_DEVICES numbers: positions among the GPUs the task can enumerate.
  const std::vector<std::size_t> visible = request.numbering == GpuNumbering::kAllowedOnly
                                               ? selected
                                               : pci_sorted_indices(topology.gpus);
  const auto number_of = [&](std::size_t g) {
    return static_cast<unsigned>(std::find(visible.begin(), visible.end(), g) - visible.begin());
  };
  const auto nic_of = choose_nics(topology, order);
  if (nic_of.empty()) {
    plan.warnings.push_back("topology " + topology.source +
                            " has no NIC; NCCL_IB_HCA, UCX_NET_DEVICES and NCCL_SOCKET_IFNAME are "
                            "not set");
  }
  for (std::size_t g : order) {
    const auto it = nic_of.find(g);
    if (it == nic_of.end() || it->second.closeness != Closeness::kSys) continue;
    const Nic& nic = topology.nics[it->second.nic];
    plan.warnings.push_back(
        "GPU " + topology.gpus[g].bus_id + " has no NIC in its NUMA domain; it uses " +
        (nic.hca.empty() ? nic.netdev : nic.hca) + " across the CPU interconnect (SYS)");
  }

  const std::vector<NicChoice> fabric = node_fabric_nics(topology);
  for (TaskBinding& task : plan.tasks) task.node_nics = fabric;

  std::vector<const CpuList*> domains;  // CPU domains in order of first use
  std::vector<std::vector<std::size_t>> users;
  for (std::size_t t = 0; t < tasks; ++t) {
    TaskBinding& task = plan.tasks[t];
    std::sort(gpus_of[t].begin(), gpus_of[t].end(), [&](std::size_t a, std::size_t b) {
      return pci_order_less(topology.gpus[a].bus_id, topology.gpus[b].bus_id);
    });
    for (std::size_t g : gpus_of[t]) {
      const Gpu& gpu = topology.gpus[g];
      task.gpu_bus_ids.push_back(gpu.bus_id);
      task.gpu_numbers.push_back(number_of(g));
      if (const auto it = nic_of.find(g); it != nic_of.end()) {
        const Nic& nic = topology.nics[it->second.nic];
        const bool seen = std::any_of(task.nics.begin(), task.nics.end(),
                                      [&](const NicChoice& c) { return c.bus_id == nic.bus_id; });
        if (!seen)
          task.nics.push_back({nic.bus_id, nic.hca, nic.netdev, nic.port, it->second.closeness});
      }
      const CpuList& domain = gpu.placement.locality.cpus;
      auto d = std::find_if(domains.begin(), domains.end(),
                            [&](const CpuList* c) { return *c == domain; });
      if (d == domains.end()) {
        domains.push_back(&domain);
        users.emplace_back();
        d = domains.end() - 1;
      }
      auto& list = users[static_cast<std::size_t>(d - domains.begin())];
      if (std::find(list.begin(), list.end(), t) == list.end()) list.push_back(t);
    }
  }
  assign_views(plan, request.node_view);

  // A GPU whose domain has no CPU (none described, or none in the step's cpuset): splitting
  // "all CPUs" for its tasks would overlap the other domains' shares, so every task's CPUs come
  // from one split of all CPUs instead; the GPUs stay as planned.
  if (std::any_of(domains.begin(), domains.end(), [](const CpuList* c) { return c->empty(); })) {
    plan.warnings.push_back("a GPU's locality in topology " + topology.source +
                            " has none of the CPUs the step may use; the tasks share out all of "
                            "them (" +
                            format_cpu_list(all_cpus(topology)) + ") regardless of GPU locality");
    plan_cpu_only(topology, plan);
    return;
  }
  for (std::size_t d = 0; d < domains.size(); ++d) {
    const CpuList& domain = *domains[d];
    const auto shares = split_domain(topology, domain, users[d].size(),
                                     "CPU domain " + format_cpu_list(domain), plan.warnings);
    for (std::size_t i = 0; i < users[d].size(); ++i) {
      CpuList& cpus = plan.tasks[users[d][i]].cpus;
      cpus.insert(cpus.end(), shares[i].begin(), shares[i].end());
    }
  }
}

}  // namespace

BindingPlan plan_binding(const NodeTopology& topology, const BindingRequest& request) {
  if (request.local_tasks == 0 || request.local_tasks > kMaxLocalTasks) {
    throw_invalid("binding request: local task count " + std::to_string(request.local_tasks) +
                  " must be between 1 and " + std::to_string(kMaxLocalTasks));
  }
  BindingPlan plan;
  plan.tasks.resize(request.local_tasks);
  for (unsigned t = 0; t < request.local_tasks; ++t) plan.tasks[t].local_rank = t;

  if (!topology.has_io) {
    plan.warnings.push_back("topology " + topology.source +
                            " has no I/O information (no PCI devices); binding CPUs only, "
                            "without GPUs or NICs");
    plan_cpu_only(topology, plan);
  } else {
    const std::vector<std::size_t> selected = select_gpus(topology, request);
    if (selected.empty()) {
      plan_cpu_only(topology, plan);
    } else {
      plan_gpus(topology, request, selected, plan);
    }
  }
  for (TaskBinding& task : plan.tasks) describe_cpus(topology, task);
  return plan;
}

std::vector<unsigned> parse_gpu_index_list(std::string_view text, std::string_view what) {
  core::require_length(text, what);
  std::vector<unsigned> indices;
  if (text.empty()) return indices;
  for (std::string_view item : core::split(text, ',')) {
    indices.push_back(static_cast<unsigned>(core::parse_unsigned(item, what, 0, 1023)));
  }
  return indices;
}

}  // namespace dtrain::topology
