// SPDX-License-Identifier: Apache-2.0
// dtrain_scale_step: one node's share of a very large step (12,500 nodes × 8 tasks by default),
// planned offline through the plugin's own code path as user_init and task_init run it:
// core::plan_step (layout, name resolution, ports, endpoint list), the port probe, the binding
// plan from a topology XML (topology::load_topology + bind_node), core::node_environment, and
// the memory files of the values too long for execve. Names resolve through a hosts file read
// once (`--resolver hosts-file`) or through getaddrinfo (`--resolver system`, meaningful where
// /etc/hosts holds the step's names: tests/bench/scale_step.sh bind-mounts one in a private mount
// namespace). Every lookup is counted. Prints the median time of each phase over --repeat runs,
// the lookups per node and across the step, the largest environment strings and the bytes put
// into memory files.

#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/memory_file_io.hpp"
#include "core/net_io.hpp"
#include "core/node_environment.hpp"
#include "core/step_plan.hpp"
#include "topology/load_io.hpp"
#include "topology/node_binding.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::uint32_t nodes = 12500;
  std::uint32_t tasks_per_node = 8;
  std::uint32_t node = 0;
  std::string resolver = "hosts-file";
  std::string hosts_file;
  bool write_hosts_file = false;
  bool environment_in_user_init = false;
  std::string topology;
  std::vector<std::string> plugstack_args;
  unsigned repeat = 9;
  std::string tf_config_out;
};

std::string host_name(std::uint32_t index) {
  char name[16];
  std::snprintf(name, sizeof name, "node%05u", index + 1);
  return name;
}

// 10.0.0.0/8 holds every index up to 2^24, one address each.
std::string host_address(std::uint32_t index) {
  const std::uint32_t n = index + 1;
  return "10." + std::to_string((n >> 16) & 0xff) + "." + std::to_string((n >> 8) & 0xff) + "." +
         std::to_string(n & 0xff);
}

void write_hosts_file(const Options& o) {
  std::ofstream out(o.hosts_file);
  out << "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
  for (std::uint32_t i = 0; i < o.nodes; ++i)
    out << host_address(i) << '\t' << host_name(i) << '\n';
  if (!out.flush()) {
    throw dtrain::Error(dtrain::ErrorKind::kResource, "cannot write " + o.hosts_file);
  }
}

std::unordered_map<std::string, std::string> read_hosts_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw dtrain::Error(dtrain::ErrorKind::kResource, "cannot read " + path);
  std::unordered_map<std::string, std::string> addresses;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line.substr(0, line.find('#')));
    std::string address;
    words >> address;
    for (std::string name; words >> name;) addresses.emplace(name, address);
  }
  return addresses;
}

// The resolver handed to plan_step, counting its calls and the time spent in them.
struct CountingResolver {
  dtrain::core::Resolver resolve;
  std::uint64_t lookups = 0;
  Clock::duration spent{};

  dtrain::core::Resolver counted() {
    return [this](const std::string& host) {
      ++lookups;
      const auto start = Clock::now();
      auto address = resolve(host);
      spent += Clock::now() - start;
      return address;
    };
  }
};

dtrain::core::StepInputs inputs_for(const Options& o, std::uint32_t node) {
  dtrain::core::StepInputs in;
  in.job_id = 4242;
  in.step_id = 0;
  in.node_id = node;
  in.spec.nodelist = "node[00001-" + host_name(o.nodes - 1).substr(4) + "]";
  in.spec.tasks_per_node = std::to_string(o.tasks_per_node) + "(x" + std::to_string(o.nodes) + ")";
  in.spec.nnodes = o.nodes;
  in.spec.ntasks = o.nodes * o.tasks_per_node;
  auto& placed = in.local_ranks.emplace();
  for (std::uint32_t local = 0; local < o.tasks_per_node; ++local) {
    placed.push_back(node * o.tasks_per_node + local);
  }
  return in;
}

// This thread's CPU time: unlike the wall clock, it does not grow when other work shares the
// machine's cores.
double cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const auto n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// The descriptor behind a memory file's "/proc/self/fd/<n>".
int descriptor_of(const std::string& path) {
  return std::stoi(path.substr(path.rfind('/') + 1));
}

// user_init runs once per node in slurmstepd before any task starts; task_init runs in each
// task, the tasks side by side, and makes that task's memory files. Milliseconds.
struct Timing {
  static constexpr const char* kUserInitPhases[] = {
      "resolution (the resolver's calls inside plan_step)",
      "rest of plan_step: layout, ports, endpoint list, hash, TF JSON",
      "port probe (check_ports=on)",
      "binding plan: load the topology XML, bind_node",
      "node_environment: every task's variables",
  };
  static constexpr std::size_t kPhases = std::size(kUserInitPhases);
  double user_init_phases[kPhases] = {};
  double user_init = 0;
  double user_init_cpu = 0;
  double slowest_task_init = 0;
  double all_task_inits = 0;
  double all_task_inits_cpu = 0;
};

struct RunResult {
  dtrain::core::StepPlan plan;
  dtrain::core::NodeEnvironment env;
  // Per task and variable, the value execve copies: the memory file's path for a value moved
  // there (the content stays in env), else the value itself.
  std::vector<std::vector<std::string>> exported;
  std::uint64_t lookups = 0;
  Timing timing;
};

RunResult plan_node_once(const Options& o, const dtrain::core::PluginConfig& config,
                         const dtrain::core::Resolver& base) {
  RunResult out;
  CountingResolver resolver{base};
  const auto inputs = inputs_for(o, o.node);
  const double start_cpu = cpu_ms();
  const auto start = Clock::now();
  out.plan = dtrain::core::plan_step(inputs, config, config.frameworks, resolver.counted());
  const auto planned = Clock::now();
  out.lookups = resolver.lookups;

  const auto& plan = out.plan;
  if (config.check_ports) {
    for (std::uint32_t local = 0; local < plan.layout.local_world_size(plan.node); ++local) {
      dtrain::core::port_in_use(plan.local_address, plan.ports.endpoint_ports[local]);
    }
    if (plan.layout.ranks[0].node == plan.node) {
      dtrain::core::port_in_use(plan.local_address, plan.ports.master);
    }
  }
  const auto probed = Clock::now();

  dtrain::topology::StepGpuVariables gpus;
  gpus.slurm_only = config.gpus_from_slurm_only;
  const auto local_tasks = plan.layout.local_world_size(plan.node);
  const auto binding = o.topology.empty()
                           ? dtrain::topology::unbound_node(gpus)
                           : dtrain::topology::bind_node(
                                 dtrain::topology::load_topology(o.topology), local_tasks, gpus)
                                 .env;
  const auto bound = Clock::now();

  // The plugin builds each task's variables in that task's task_init (core::task_environment);
  // --environment-in-user-init builds all of them in user_init instead, as it once did, to
  // compare with.
  if (o.environment_in_user_init) {
    out.env = dtrain::core::node_environment(plan, plan.node, binding);
  }
  const auto assembled = Clock::now();
  const double assembled_cpu = cpu_ms();

  double slowest_task = 0;
  double all_tasks = 0;
  for (std::uint32_t local = 0; local < local_tasks; ++local) {
    const auto task_start = Clock::now();
    if (!o.environment_in_user_init) {
      out.env.tasks.push_back(dtrain::core::task_environment(plan, plan.node, local, binding).vars);
    }
    auto& values = out.exported.emplace_back();
    const auto& vars = out.env.tasks[local];
    const dtrain::core::MemoryFileOwner owner{4242, 0, plan.layout.node_ranks[plan.node][local]};
    const auto paths = dtrain::core::export_memory_files(owner, vars);
    for (std::size_t v = 0; v < vars.size(); ++v) {
      values.push_back(vars[v].value_in_memory_file ? paths[v] : vars[v].value);
    }
    const double task_ms = ms(Clock::now() - task_start);
    slowest_task = std::max(slowest_task, task_ms);
    all_tasks += task_ms;
  }
  const double exported_cpu = cpu_ms();
  for (std::size_t t = 0; t < out.env.tasks.size(); ++t) {
    for (std::size_t v = 0; v < out.env.tasks[t].size(); ++v) {
      if (out.env.tasks[t][v].value_in_memory_file) close(descriptor_of(out.exported[t][v]));
    }
  }

  auto& t = out.timing;
  const double phases[] = {ms(resolver.spent), ms(planned - start - resolver.spent),
                           ms(probed - planned), ms(bound - probed), ms(assembled - bound)};
  std::copy(std::begin(phases), std::end(phases), t.user_init_phases);
  t.user_init = ms(assembled - start);
  t.user_init_cpu = assembled_cpu - start_cpu;
  t.slowest_task_init = slowest_task;
  t.all_task_inits = all_tasks;
  t.all_task_inits_cpu = exported_cpu - assembled_cpu;
  return out;
}

// How many names plan_step resolves on `node`. The count does not depend on the answers, so a
// stub answers (a documentation address): counting the other nodes costs no real lookups.
std::uint64_t lookups_on(const Options& o, const dtrain::core::PluginConfig& config,
                         std::uint32_t node) {
  CountingResolver resolver{[](const std::string&) { return std::string("192.0.2.1"); }};
  dtrain::core::plan_step(inputs_for(o, node), config, config.frameworks, resolver.counted());
  return resolver.lookups;
}

std::string abbreviated(const std::string& value) {
  constexpr std::size_t kShown = 72;
  if (value.size() <= kShown) return value;
  return value.substr(0, kShown) + "... (" + std::to_string(value.size()) + " bytes)";
}

// What a framework reads from local task 0: the value itself, or where it lies.
void print_framework_view(const RunResult& run) {
  static const char* const kShown[] = {"MASTER_ADDR",
                                       "MASTER_PORT",
                                       "PADDLE_MASTER",
                                       "PADDLE_CURRENT_ENDPOINT",
                                       "PADDLE_TRAINER_ENDPOINTS",
                                       "TF_CONFIG",
                                       "DTRAIN_MASTER_ADDR",
                                       "DTRAIN_CURRENT_ENDPOINT",
                                       "DTRAIN_ENDPOINTS",
                                       "DTRAIN_ENDPOINTS_HASH"};
  std::cout << "what local task 0 gets (a memory file's content after '->'):\n";
  const auto& task = run.env.tasks.at(0);
  for (const char* shown : kShown) {
    for (std::size_t v = 0; v < task.size(); ++v) {
      const auto& var = task[v];
      if (var.value_in_memory_file && var.name == std::string(shown) + "_FILE") {
        std::cout << "  " << var.name << "=" << run.exported[0][v] << " -> "
                  << abbreviated(var.value) << "\n";
      } else if (var.name == shown) {
        std::cout << "  " << var.name << "=" << abbreviated(var.value) << "\n";
      }
    }
  }
}

// Each timed run plans in a fresh child process, as each step's slurmstepd plans in a process of
// its own: the megabytes of a large step's values land on pages never touched before, and those
// page faults are a large part of the time. Nothing when the run failed (the caller's own run
// then reports why).
std::optional<Timing> timed_run_in_child(const Options& o, const dtrain::core::PluginConfig& config,
                                         const dtrain::core::Resolver& base) {
  int channel[2];
  if (pipe(channel) != 0) return std::nullopt;
  const pid_t child = fork();
  if (child == 0) {
    close(channel[0]);
    try {
      const Timing timing = plan_node_once(o, config, base).timing;
      const bool sent = write(channel[1], &timing, sizeof timing) == sizeof timing;
      _exit(sent ? 0 : 1);
    } catch (...) {
      _exit(1);
    }
  }
  close(channel[1]);
  Timing timing;
  const bool received = child > 0 && read(channel[0], &timing, sizeof timing) == sizeof timing;
  close(channel[0]);
  int status = 0;
  if (child > 0) waitpid(child, &status, 0);
  if (!received || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return timing;
}

int run(const Options& o) {
  if (o.write_hosts_file) {
    write_hosts_file(o);
    std::cout << "dtrain: scale-step: wrote " << o.nodes << " names to " << o.hosts_file << "\n";
    return 0;
  }
  const auto config = dtrain::core::parse_plugin_args(o.plugstack_args);
  dtrain::core::Resolver base;
  if (o.resolver == "system") {
    base = dtrain::core::resolve_host;
  } else {
    auto table = std::make_shared<std::unordered_map<std::string, std::string>>(
        read_hosts_file(o.hosts_file));
    base = [table](const std::string& host) {
      const auto found = table->find(host);
      if (found == table->end()) {
        throw dtrain::Error(dtrain::ErrorKind::kInvalidInput,
                            "cannot resolve host name '" + host + "': not in the hosts file");
      }
      return found->second;
    };
  }

  std::vector<Timing> runs;
  for (unsigned i = 0; i < o.repeat; ++i) {
    auto timing = timed_run_in_child(o, config, base);
    if (!timing) break;
    runs.push_back(*timing);
  }
  // The figures other than times, from a run of this process: it also reports any error.
  const RunResult first = plan_node_once(o, config, base);
  if (runs.size() != o.repeat) {
    throw dtrain::Error(dtrain::ErrorKind::kResource, "a timed run in a child process failed");
  }
  const auto median_of = [&runs](auto field) {
    std::vector<double> values;
    for (const auto& run : runs) values.push_back(field(run));
    return median(values);
  };
  const auto& plan = first.plan;
  const std::uint64_t nodes = plan.layout.node_count();

  std::cout << "dtrain: scale-step: " << nodes << " nodes x " << o.tasks_per_node
            << " tasks = " << plan.layout.world_size() << " ranks; node " << o.node << " ("
            << plan.layout.hosts[o.node] << "); resolver " << o.resolver
            << (o.resolver == "hosts-file" ? " (" + o.hosts_file + ", read once)" : "")
            << "; topology " << (o.topology.empty() ? std::string("none") : o.topology) << "\n";
  std::cout << "task variables built "
            << (o.environment_in_user_init
                    ? "in user_init, for every task (--environment-in-user-init)"
                    : "by each task in its task_init, as the plugin does")
            << "\n";
  std::cout << "endpoint lists carry "
            << (plan.names_past_ip_max_nodes
                    ? "node names (past ip_max_nodes=" + std::to_string(config.ip_max_nodes) + ")"
                : config.address_mode == dtrain::core::AddressMode::kName
                    ? std::string("node names (address=name)")
                    : "addresses (ip_max_nodes=" + std::to_string(config.ip_max_nodes) + ")")
            << "\n";

  std::printf(
      "per-node plugin time, median of %u runs: %.3f ms (user_init + every task's "
      "task_init); CPU time %.3f ms\n",
      o.repeat, median_of([](const Timing& t) { return t.user_init + t.all_task_inits; }),
      median_of([](const Timing& t) { return t.user_init_cpu + t.all_task_inits_cpu; }));
  std::printf("  %-55s %10.3f ms\n", "until the last task can start, task_init side by side:",
              median_of([](const Timing& t) { return t.user_init + t.slowest_task_init; }));
  std::printf("  %-55s %10.3f ms (CPU %.3f ms)\n",
              "user_init, once per node:", median_of([](const Timing& t) { return t.user_init; }),
              median_of([](const Timing& t) { return t.user_init_cpu; }));
  for (std::size_t i = 0; i < Timing::kPhases; ++i) {
    std::printf("    %-63s %10.3f ms\n", Timing::kUserInitPhases[i],
                median_of([i](const Timing& t) { return t.user_init_phases[i]; }));
  }
  std::printf("  %-55s %10.3f ms per task (slowest), %.3f ms all tasks (CPU %.3f ms)\n",
              o.environment_in_user_init ? "task_init: memory files (memfd_create, write, seal):"
                                         : "task_init: the task's variables and memory files:",
              median_of([](const Timing& t) { return t.slowest_task_init; }),
              median_of([](const Timing& t) { return t.all_task_inits; }),
              median_of([](const Timing& t) { return t.all_task_inits_cpu; }));

  // Every node but rank 0's does what any other one does; rank 0's node may share a lookup.
  const std::uint32_t master_node = plan.layout.ranks[0].node;
  const std::uint32_t other_node = master_node == 0 ? 1 : 0;
  const std::uint64_t on_master = lookups_on(o, config, master_node);
  const std::uint64_t on_other = nodes > 1 ? lookups_on(o, config, other_node) : 0;
  std::cout << "name lookups: " << first.lookups << " on this node; " << on_master
            << " on rank 0's node, " << on_other << " on every other node; "
            << on_master + (nodes - 1) * on_other << " per step across the cluster\n";

  std::size_t longest_string = 0;
  std::string longest_name;
  std::size_t longest_value = 0;
  std::string longest_value_name;
  std::vector<std::uint64_t> memory_bytes;
  std::size_t files_per_task = 0;
  for (std::size_t t = 0; t < first.env.tasks.size(); ++t) {
    std::uint64_t bytes = 0;
    std::set<std::string> files;  // names with equal values share a file
    for (std::size_t v = 0; v < first.env.tasks[t].size(); ++v) {
      const auto& var = first.env.tasks[t][v];
      // What execve copies: "NAME=value" and its terminating NUL.
      const std::size_t size = var.name.size() + 1 + first.exported[t][v].size() + 1;
      if (size > longest_string) longest_string = size, longest_name = var.name;
      if (!var.value_in_memory_file) continue;
      if (files.insert(first.exported[t][v]).second) bytes += var.value.size();
      if (var.value.size() > longest_value) {
        longest_value = var.value.size(), longest_value_name = var.name;
      }
    }
    files_per_task = std::max(files_per_task, files.size());
    memory_bytes.push_back(bytes);
  }
  std::uint64_t node_bytes = 0;
  for (auto b : memory_bytes) node_bytes += b;
  std::cout << "largest environment string execve gets: " << longest_name << ", " << longest_string
            << " bytes with NAME= and NUL (limit " << dtrain::core::kMaxEnvStringBytes << ")\n";
  std::cout << "largest value, in a memory file: "
            << (longest_value_name.empty()
                    ? std::string("none")
                    : longest_value_name + ", " + std::to_string(longest_value) + " bytes")
            << "\n";
  std::cout << "memory files: " << files_per_task << " per task, "
            << *std::max_element(memory_bytes.begin(), memory_bytes.end())
            << " bytes per task (largest), " << node_bytes << " bytes per node ("
            << first.env.tasks.size() << " tasks)\n";
  if (!first.env.spill_warning.empty())
    std::cout << "# warning: " << first.env.spill_warning << "\n";
  for (const auto& w : plan.step_warnings) std::cout << "# warning: " << w << "\n";
  print_framework_view(first);

  if (!o.tf_config_out.empty()) {
    for (const auto& var : first.env.tasks.at(0)) {
      if (var.name != "TF_CONFIG" && var.name != "TF_CONFIG_FILE") continue;
      std::ofstream out(o.tf_config_out, std::ios::binary);
      out << var.value;
      if (!out.flush()) {
        throw dtrain::Error(dtrain::ErrorKind::kResource, "cannot write " + o.tf_config_out);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "dtrain_scale_step: one node's share of a large step, through the plugin's own planning "
      "code, timed phase by phase, with its name lookups counted (see docs/scale.md)."};
  app.add_option("--nodes", o.nodes, "Nodes in the step (named node00001, node00002, ...)")
      ->check(CLI::Range(1u, 99999u))
      ->capture_default_str();
  app.add_option("--tasks-per-node", o.tasks_per_node, "Tasks on every node")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  app.add_option("--node", o.node, "The node index to plan (SLURM_NODEID)")->capture_default_str();
  app.add_option("--resolver", o.resolver,
                 "hosts-file: the --hosts-file, read once; system: getaddrinfo")
      ->check(CLI::IsMember({"hosts-file", "system"}))
      ->capture_default_str();
  app.add_option("--hosts-file", o.hosts_file, "A hosts file naming every node");
  app.add_flag("--write-hosts-file", o.write_hosts_file,
               "Write the step's --nodes names to --hosts-file and stop");
  app.add_flag("--environment-in-user-init", o.environment_in_user_init,
               "Build every task's variables in user_init (core::node_environment), not each in "
               "its own task_init as the plugin does");
  app.add_option("--topology", o.topology, "hwloc XML of the nodes (none: no binding plan)");
  app.add_option("--plugstack-args", o.plugstack_args, "plugstack.conf arguments (key=value)")
      ->expected(0, -1);
  app.add_option("--repeat", o.repeat, "Runs to take the medians of")
      ->check(CLI::Range(1u, 1000u))
      ->capture_default_str();
  app.add_option("--tf-config-out", o.tf_config_out,
                 "Write local task 0's TF_CONFIG (the memory file's content) to FILE");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (o.node >= o.nodes) {
    std::cerr << "dtrain: scale-step: --node " << o.node << " is outside the step's " << o.nodes
              << " nodes\n";
    return 2;
  }
  if (o.hosts_file.empty() && (o.write_hosts_file || o.resolver == "hosts-file")) {
    std::cerr << "dtrain: scale-step: give --hosts-file (see --help)\n";
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::cerr << "dtrain: scale-step: " << e.what() << "\n";
    return 1;
  }
}
