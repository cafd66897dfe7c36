// SPDX-License-Identifier: Apache-2.0
// The GPU view (core::GpuView, BindingRequest::node_view) on real topologies and every task count:
// device DTRAIN_CUDA_DEVICE (LOCAL_RANK in the node view) of a task's CUDA_VISIBLE_DEVICES is the
// GPU its CPUs and NIC were chosen for, a task never sees a GPU its step does not hold, and no two
// tasks of a node claim one GPU under any framework's rule.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/node_environment.hpp"
#include "core/parse.hpp"
#include "core/step_plan.hpp"
#include "topology/binding.hpp"
#include "topology/load_io.hpp"
#include "topology/node_binding.hpp"
#include "topology_test_support.hpp"

namespace dtrain::topology {
namespace {

using testing::fixture;
using testing::shared_topology;

struct Machine {
  const char* name;
  bool shared;  // a real capture (DTRAIN_SHARED_TOPOLOGIES) rather than a repository fixture
};

// DGX H100, AWS p4d and p5en, LLNL's Lassen (4 GPUs, 2 sockets).
const std::vector<Machine>& machines() {
  static const std::vector<Machine> list = {{"dgx-h100.xml", false},
                                            {"aws-ofi-nccl_p4d_topology.xml", true},
                                            {"aws-ofi-nccl_p5en_topology.xml", true},
                                            {"mpibind_coral-lassen.xml", true}};
  return list;
}

NodeTopology load(const Machine& m) {
  return load_topology(m.shared ? shared_topology(m.name) : fixture(m.name));
}

std::vector<unsigned> numbers(const std::string& list) {
  std::vector<unsigned> out;
  if (list.empty()) return out;
  for (const auto item : core::split(list, ',')) {
    out.push_back(static_cast<unsigned>(core::parse_unsigned(item, "test", 0, 1023)));
  }
  return out;
}

// Bus ids of the node's GPUs in PCI order: what number N of CUDA_VISIBLE_DEVICES names (with
// CUDA_DEVICE_ORDER=PCI_BUS_ID) when every GPU is the step's.
std::vector<std::string> pci_ordered_bus_ids(const NodeTopology& topology) {
  std::vector<std::string> ids;
  for (const auto& gpu : topology.gpus) ids.push_back(gpu.bus_id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

const Gpu& gpu_with_bus_id(const NodeTopology& topology, const std::string& bus_id) {
  for (const auto& gpu : topology.gpus) {
    if (gpu.bus_id == bus_id) return gpu;
  }
  throw std::runtime_error("no GPU " + bus_id);
}

TEST(GpuView, DeviceIndexNamesTheGpuTheCpusAndNicWereChosenFor) {
  SKIP_WITHOUT_SHARED_TOPOLOGIES();
  for (const Machine& m : machines()) {
    const NodeTopology topology = load(m);
    const auto by_number = pci_ordered_bus_ids(topology);
    const unsigned gpus = static_cast<unsigned>(topology.gpus.size());
    ASSERT_GE(gpus, 4u) << m.name;
    for (const bool node_view : {false, true}) {
      for (unsigned tasks = 1; tasks <= 2 * gpus + 1; ++tasks) {
        SCOPED_TRACE(std::string(m.name) + " tasks=" + std::to_string(tasks) +
                     (node_view ? " node view" : " task view"));
        BindingRequest request;
        request.local_tasks = tasks;
        request.node_view = node_view;
        const BindingPlan plan = plan_binding(topology, request);
        const bool expect_node_view = node_view && tasks == gpus;
        std::set<unsigned> claimed;
        for (const TaskBinding& task : plan.tasks) {
          ASSERT_FALSE(task.gpu_bus_ids.empty());
          const auto visible = numbers(task.cuda_visible_devices);
          ASSERT_EQ(task.device_indices.size(), task.gpu_bus_ids.size());
          if (expect_node_view) {
            EXPECT_EQ(task.cuda_visible_devices, plan.tasks[0].cuda_visible_devices);
            EXPECT_EQ(visible.size(), gpus);
            EXPECT_EQ(task.device_indices, std::vector<unsigned>{task.local_rank});
          } else {
            // Its own GPUs only, devices 0..k-1.
            EXPECT_EQ(visible.size(), task.gpu_bus_ids.size());
            for (unsigned i = 0; i < task.device_indices.size(); ++i) {
              EXPECT_EQ(task.device_indices[i], i);
            }
          }
          for (std::size_t i = 0; i < task.device_indices.size(); ++i) {
            ASSERT_LT(task.device_indices[i], visible.size());
            const unsigned number = visible[task.device_indices[i]];
            ASSERT_LT(number, by_number.size());
            // The device the task uses is the GPU the plan chose for it ...
            EXPECT_EQ(by_number[number], task.gpu_bus_ids[i]);
            if (tasks <= gpus) {
              EXPECT_TRUE(claimed.insert(number).second) << "GPU " << number;
            }
          }
          // ... and its NIC and CPUs were chosen for that GPU: the NIC is the one the GPU's
          // binding names, and a one-GPU task's CPUs lie in that GPU's locality.
          ASSERT_FALSE(task.nics.empty());
          if (task.gpu_bus_ids.size() == 1) {
            const Gpu& own = gpu_with_bus_id(topology, task.gpu_bus_ids.front());
            const auto& local_cpus = own.placement.locality.cpus;
            for (const unsigned cpu : task.cpus) {
              EXPECT_TRUE(std::binary_search(local_cpus.begin(), local_cpus.end(), cpu))
                  << "CPU " << cpu << " outside GPU " << own.bus_id << "'s locality";
            }
          }
        }
      }
    }
  }
}

TEST(GpuView, NeverShowsAGpuTheStepDoesNotHold) {
  // gres gave the step GPUs 1, 2, 5 and 6 of a DGX H100, without device constraint: the node
  // view lists those four in local-rank order, numbered on the whole node.
  const NodeTopology topology = load_topology(fixture("dgx-h100.xml"));
  StepGpuVariables gpus;
  gpus.step_gpus = "1,2,5,6";
  gpus.cuda_visible_devices = "1,2,5,6";
  gpus.node_view = true;
  const NodeBinding bound = bind_node(topology, 4, gpus);
  ASSERT_EQ(bound.env.tasks.size(), 4u);
  for (unsigned local = 0; local < 4; ++local) {
    const auto& task = bound.env.tasks[local];
    std::map<std::string, std::string> env;
    for (const auto& var : task.env) env[var.name] = var.value;
    EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "1,2,5,6");
    EXPECT_EQ(env["DTRAIN_CUDA_DEVICE"], std::to_string(local));
    EXPECT_EQ(task.device_indices, std::vector<unsigned>{local});
  }
  // With the cgroup hiding the rest (Slurm renumbers from 0): the same view, renumbered.
  gpus.cuda_visible_devices = "0,1,2,3";
  const NodeBinding constrained = bind_node(topology, 4, gpus);
  for (const auto& task : constrained.env.tasks) {
    for (const auto& var : task.env) {
      if (var.name == "CUDA_VISIBLE_DEVICES") {
        EXPECT_EQ(var.value, "0,1,2,3");
      }
    }
  }
  // Two tasks on four GPUs: each sees its own two only.
  gpus.cuda_visible_devices = "1,2,5,6";
  const NodeBinding two = bind_node(topology, 2, gpus);
  std::vector<std::string> views;
  for (const auto& task : two.env.tasks) {
    for (const auto& var : task.env) {
      if (var.name == "CUDA_VISIBLE_DEVICES") views.push_back(var.value);
    }
  }
  EXPECT_EQ(views, (std::vector<std::string>{"1,2", "5,6"}));
}

TEST(GpuView, AUserListIsKeptAndTheDeviceIndexPointsIntoIt) {
  // Without gres, a CUDA_VISIBLE_DEVICES the user set limits the GPUs and is kept as written:
  // the task's device is its GPU's position in the user's order.
  const NodeTopology topology = load_topology(fixture("dgx-h100.xml"));
  StepGpuVariables gpus;
  gpus.cuda_visible_devices = "6,1";
  gpus.node_view = true;
  const NodeBinding bound = bind_node(topology, 2, gpus);
  ASSERT_EQ(bound.env.tasks.size(), 2u);
  // Task 0 gets GPU 1 (PCI order first), at position 1 of "6,1"; task 1 gets GPU 6, at 0.
  EXPECT_EQ(bound.env.tasks[0].device_indices, std::vector<unsigned>{1});
  EXPECT_EQ(bound.env.tasks[1].device_indices, std::vector<unsigned>{0});
}

// What each framework's usual code would open, as GPU numbers of CUDA_VISIBLE_DEVICES:
//  torch: `cuda:DTRAIN_CUDA_DEVICE` (`cuda:LOCAL_RANK` where the node view holds);
//  paddle: FLAGS_selected_gpus; jax: JAX_LOCAL_DEVICE_IDS (else JAX's own [SLURM_LOCALID]);
//  tf: every GPU it sees (MultiWorkerMirroredStrategy).
std::set<unsigned> claims(const std::vector<core::EnvVar>& env, const std::string& family,
                          unsigned local_rank) {
  std::map<std::string, std::string> vars;
  for (const auto& var : env) vars[var.name] = var.value;
  const auto visible = numbers(vars["CUDA_VISIBLE_DEVICES"]);
  std::vector<unsigned> devices;
  if (family == "torch") {
    devices = {static_cast<unsigned>(std::stoul(vars.at("DTRAIN_CUDA_DEVICE")))};
  } else if (family == "paddle") {
    devices = numbers(vars.at("FLAGS_selected_gpus"));
  } else if (family == "jax") {
    devices = vars.count("JAX_LOCAL_DEVICE_IDS") ? numbers(vars["JAX_LOCAL_DEVICE_IDS"])
                                                 : std::vector<unsigned>{local_rank};
  } else {
    for (unsigned i = 0; i < visible.size(); ++i) devices.push_back(i);
  }
  std::set<unsigned> out;
  for (const unsigned device : devices) {
    if (device >= visible.size()) throw std::runtime_error(family + ": invalid device ordinal");
    out.insert(visible[device]);
  }
  return out;
}

TEST(GpuView, NoTwoTasksClaimOneGpuUnderAnyFamily) {
  SKIP_WITHOUT_SHARED_TOPOLOGIES();
  const std::vector<std::string> families = {"torch", "paddle", "jax", "tf"};
  for (const Machine& m : machines()) {
    const NodeTopology topology = load(m);
    const unsigned gpus = static_cast<unsigned>(topology.gpus.size());
    for (const std::string set_text : {"torch", "paddle", "jax", "tf", "all"}) {
      const core::FrameworkSet exported = core::parse_frameworks(set_text);
      for (unsigned tasks = 1; tasks <= gpus; ++tasks) {
        SCOPED_TRACE(std::string(m.name) + " --distributed-train=" + set_text +
                     " tasks=" + std::to_string(tasks));
        core::PluginConfig config;
        config.address_mode = core::AddressMode::kName;
        core::StepInputs inputs;
        inputs.job_id = 7;
        inputs.spec = {"n1", std::to_string(tasks), core::parse_distribution("block"), 1, tasks,
                       {}};
        const auto plan = core::plan_step(inputs, config, exported, nullptr);
        StepGpuVariables variables;
        variables.node_view = core::node_gpu_view(core::GpuView::kAuto, exported);
        const auto bound = bind_node(topology, tasks, variables);
        const auto env = core::node_environment(plan, 0, bound.env);
        for (const std::string& family : families) {
          const bool in_set = set_text == std::string("all") || set_text == family;
          if (!in_set) continue;
          // TensorFlow beside the index-picking families sees the node view when each task
          // has one GPU: the documented trade-off of the default (--distributed-train=tf, or
          // --distributed-train-gpu-view=task, gives each worker its own GPU).
          const bool tf_sees_all = family == "tf" && variables.node_view && tasks == gpus;
          std::set<unsigned> seen;
          bool overlap = false;
          for (unsigned local = 0; local < tasks; ++local) {
            for (const unsigned gpu : claims(env.tasks[local], family, local)) {
              overlap |= !seen.insert(gpu).second;
            }
          }
          EXPECT_EQ(overlap, tf_sees_all && tasks > 1) << family;
        }
      }
    }
  }
}

TEST(GpuView, AutoIsTheNodeViewUnlessTensorFlowIsAlone) {
  using core::GpuView;
  using core::node_gpu_view;
  using core::parse_frameworks;
  EXPECT_TRUE(node_gpu_view(GpuView::kAuto, parse_frameworks("all")));
  EXPECT_TRUE(node_gpu_view(GpuView::kAuto, parse_frameworks("torch")));
  EXPECT_TRUE(node_gpu_view(GpuView::kAuto, parse_frameworks("jax")));
  EXPECT_TRUE(node_gpu_view(GpuView::kAuto, parse_frameworks("paddle,tf")));
  EXPECT_FALSE(node_gpu_view(GpuView::kAuto, parse_frameworks("tf")));
  EXPECT_FALSE(node_gpu_view(GpuView::kTask, parse_frameworks("torch")));
  EXPECT_TRUE(node_gpu_view(GpuView::kNode, parse_frameworks("tf")));
}

}  // namespace
}  // namespace dtrain::topology
