// SPDX-License-Identifier: Apache-2.0
// Facts about real hwloc captures published by other projects (DTRAIN_SHARED_TOPOLOGIES).

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "topology/binding.hpp"
#include "topology/environment.hpp"
#include "topology/load_io.hpp"
#include "topology_test_support.hpp"

namespace dtrain::topology {
namespace {

using testing::fixture;
using testing::shared_topology;

BindingPlan plan(const NodeTopology& topo, unsigned tasks) {
  BindingRequest request;
  request.local_tasks = tasks;
  return plan_binding(topo, request);
}

std::size_t count_hcas(const NodeTopology& topo) {
  return static_cast<std::size_t>(std::count_if(topo.nics.begin(), topo.nics.end(),
                                                [](const Nic& n) { return !n.hca.empty(); }));
}

std::string env_value(const TaskBinding& task, const std::string& name) {
  for (const auto& [key, value] : binding_environment(task)) {
    if (key == name) return value;
  }
  return "(unset)";
}

struct Expected {
  const char* file;
  std::size_t gpus;
  std::size_t hcas;
};

TEST(RealTopologies, GpuAndNicCountsMatchTheReadme) {
  SKIP_WITHOUT_SHARED_TOPOLOGIES();
  for (const Expected& e :
       {Expected{"flux-core_ipa20.xml", 4, 4}, Expected{"mpibind_coral-lassen.xml", 4, 4},
        Expected{"mpibind_cts1-pascal.xml", 2, 1}, Expected{"aws-ofi-nccl_p4d_topology.xml", 8, 4},
        Expected{"aws-ofi-nccl_p5en_topology.xml", 8, 16},
        Expected{"hwloc_32em64t-2n8c2t-pci-normalio.xml", 3, 1}}) {
    SCOPED_TRACE(e.file);
    const NodeTopology topo = load_topology(shared_topology(e.file));
    EXPECT_TRUE(topo.has_io);
    EXPECT_EQ(topo.gpus.size(), e.gpus);
    EXPECT_EQ(count_hcas(topo), e.hcas);
    // Every GPU gets a NIC, and the plan covers every GPU once.
    const BindingPlan p = plan(topo, static_cast<unsigned>(e.gpus));
    for (const TaskBinding& task : p.tasks) {
      EXPECT_EQ(task.gpu_bus_ids.size(), 1u);
      EXPECT_EQ(task.nics.size(), 1u);
      EXPECT_FALSE(task.cpus.empty());
    }
  }
}

TEST(RealTopologies, P4dGpusAreFoundThroughPciClassAndShareEfaPerHostBridge) {
  SKIP_WITHOUT_SHARED_TOPOLOGIES();
  const NodeTopology topo = load_topology(shared_topology("aws-ofi-nccl_p4d_topology.xml"));
  ASSERT_EQ(topo.gpus.size(), 8u);
  for (const Gpu& gpu : topo.gpus) {
    EXPECT_TRUE(gpu.cuda_name.empty());
    EXPECT_TRUE(gpu.nvml_name.empty());
    EXPECT_NE(gpu.model.find("A100"), std::string::npos) << gpu.model;
  }
  const BindingPlan p = plan(topo, 8);
  EXPECT_TRUE(p.warnings.empty());
  for (unsigned t = 0; t < 8; ++t) {
    SCOPED_TRACE(t);
    ASSERT_EQ(p.tasks[t].nics.size(), 1u);
    EXPECT_EQ(p.tasks[t].nics[0].closeness, Closeness::kPhb);
    EXPECT_EQ(p.tasks[t].nics[0].hca.substr(0, 5), "rdmap");
    EXPECT_EQ(p.tasks[t].nics[0].hca, p.tasks[t & ~1u].nics[0].hca);    // two GPUs per EFA
    EXPECT_EQ(env_value(p.tasks[t], "NCCL_SOCKET_IFNAME"), "(unset)");  // EFA has no netdev
  }
  EXPECT_EQ(env_value(p.tasks[0], "DTRAIN_NIC"), "rdmap16s27:1");
  EXPECT_NE(p.tasks[0].nics[0].hca, p.tasks[2].nics[0].hca);
}

// NCCL_IB_HCA is one value for every task of a node, whatever the task count or the GPUs the
// step holds: every NIC closest to some GPU, storage and management NICs left out. DTRAIN_NIC
// and UCX_NET_DEVICES keep each task's own rail, which is always part of that list.
struct FabricCase {
  const char* file;
  bool shared;
  const char* nccl_ib_hca;
};

TEST(RealTopologies, NcclIbHcaIsNodeWideAndListsOnlyTheGpusFabric) {
  SKIP_WITHOUT_SHARED_TOPOLOGIES();
  const FabricCase cases[] = {
      {"dgx-h100.xml", false,
       "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1"},
      {"aws-ofi-nccl_p4d_topology.xml", true,
       "=rdmap16s27:1,rdmap32s27:1,rdmap144s27:1,rdmap160s27:1"},
      {"aws-ofi-nccl_p5en_topology.xml", true,
       "=rdmap85s0:1,rdmap86s0:1,rdmap87s0:1,rdmap88s0:1,rdmap110s0:1,rdmap111s0:1,"
       "rdmap112s0:1,rdmap113s0:1,rdmap135s0:1,rdmap136s0:1,rdmap137s0:1,rdmap138s0:1,"
       "rdmap160s0:1,rdmap161s0:1,rdmap162s0:1,rdmap163s0:1"},
      {"mpibind_coral-lassen.xml", true, "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1"},
  };
  for (const FabricCase& c : cases) {
    SCOPED_TRACE(c.file);
    const NodeTopology topo = load_topology(c.shared ? shared_topology(c.file) : fixture(c.file));
    const auto gpus = static_cast<unsigned>(topo.gpus.size());
    for (unsigned tasks = 1; tasks <= gpus; ++tasks) {
      const BindingPlan p = plan(topo, tasks);
      for (const TaskBinding& task : p.tasks) {
        EXPECT_EQ(env_value(task, "NCCL_IB_HCA"), c.nccl_ib_hca) << tasks << " tasks";
        for (const NicChoice& own : task.nics) {
          EXPECT_NE(std::string(c.nccl_ib_hca).find(own.hca + ":"), std::string::npos) << own.hca;
        }
        EXPECT_NE(env_value(task, "DTRAIN_NIC"), "(unset)");
      }
    }
    // A step holding only the last GPU still lists the whole node's fabric.
    BindingRequest last;
    last.allowed_gpu_indices = std::vector<unsigned>{gpus - 1};
    const BindingPlan one = plan_binding(topo, last);
    EXPECT_EQ(env_value(one.tasks[0], "NCCL_IB_HCA"), c.nccl_ib_hca);
    EXPECT_EQ(env_value(one.tasks[0], "UCX_NET_DEVICES"), env_value(one.tasks[0], "DTRAIN_NIC"));
  }
}

TEST(RealTopologies, P5enGivesEachGpuItsOwnSwitchLocalEfa) {
  SKIP_WITHOUT_SHARED_TOPOLOGIES();
  const BindingPlan p = plan(load_topology(shared_topology("aws-ofi-nccl_p5en_topology.xml")), 8);
  EXPECT_TRUE(p.warnings.empty());
  std::vector<std::string> used;
  for (const TaskBinding& task : p.tasks) {
    ASSERT_EQ(task.nics.size(), 1u);
    EXPECT_EQ(task.nics[0].closeness, Closeness::kPix);
    used.push_back(task.nics[0].hca);
  }
  std::sort(used.begin(), used.end());
  EXPECT_EQ(std::unique(used.begin(), used.end()), used.end()) << "a NIC is shared";
  EXPECT_EQ(p.tasks[0].nics[0].hca, "rdmap85s0");
  EXPECT_EQ(p.tasks[1].nics[0].hca, "rdmap86s0");
}

TEST(RealTopologies, FluxIpa20WarnsAboutTheGpuWithoutALocalNic) {
  SKIP_WITHOUT_SHARED_TOPOLOGIES();
  const NodeTopology topo = load_topology(shared_topology("flux-core_ipa20.xml"));
  EXPECT_EQ(topo.numa_nodes.size(), 8u);  // SNC4 on two sockets
  const BindingPlan p = plan(topo, 4);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("GPU 0000:cb:00.0 has no NIC in its NUMA domain"), std::string::npos)
      << p.warnings[0];
  EXPECT_EQ(p.tasks[2].gpu_bus_ids, std::vector<std::string>{"0000:cb:00.0"});
  EXPECT_EQ(p.tasks[2].nics[0].hca, "mlx5_3");  // same socket, shared with GPU 0000:db:00.0
  EXPECT_EQ(p.tasks[2].numa_nodes, std::vector<unsigned>{7});
  EXPECT_EQ(p.tasks[0].nics[0].hca, "mlx5_0");
  EXPECT_EQ(p.tasks[0].nics[0].closeness, Closeness::kPix);
  EXPECT_EQ(p.tasks[1].nics[0].hca, "mlx5_2");
  EXPECT_EQ(p.tasks[3].nics[0].closeness, Closeness::kPix);
}

TEST(RealTopologies, CtsPascalGpusShareTheSwitchNic) {
  SKIP_WITHOUT_SHARED_TOPOLOGIES();
  const BindingPlan p = plan(load_topology(shared_topology("mpibind_cts1-pascal.xml")), 2);
  for (const TaskBinding& task : p.tasks) {
    ASSERT_EQ(task.nics.size(), 1u);
    EXPECT_EQ(task.nics[0].hca, "mlx5_0");
    EXPECT_EQ(task.nics[0].closeness, Closeness::kPix);
  }
  EXPECT_EQ(format_cpu_list(p.tasks[0].cpus), "0-8,36-44");
  EXPECT_EQ(format_cpu_list(p.tasks[1].cpus), "9-17,45-53");
}

TEST(RealTopologies, HwlocTestFileSkipsNonNvidiaDisplaysAndWarnsForTheRemoteGpu) {
  SKIP_WITHOUT_SHARED_TOPOLOGIES();
  const NodeTopology topo = load_topology(shared_topology("hwloc_32em64t-2n8c2t-pci-normalio.xml"));
  ASSERT_EQ(topo.gpus.size(), 3u);  // not the AMD 84:00.1 nor the Matrox VGA
  EXPECT_EQ(topo.gpus[2].bus_id, "0000:84:00.0");
  EXPECT_EQ(topo.gpus[2].cuda_name, "cuda0");
  const BindingPlan p = plan(topo, 3);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("0000:03:00.0"), std::string::npos);
  EXPECT_EQ(p.tasks[2].nics[0].closeness, Closeness::kPix);
  EXPECT_EQ(p.tasks[1].nics[0].closeness, Closeness::kPhb);
}

// mpibind's expected mappings for Lassen: per case a "# {params}" comment, a description,
// then quoted thread, CPU and GPU mappings with ';' between tasks.
struct MpibindCase {
  nlohmann::json params;
  std::string description;
  std::vector<std::string> cpus;
  std::vector<std::string> gpus;
};

std::vector<std::string> split_tasks(std::string line) {
  line.erase(std::remove(line.begin(), line.end(), '"'), line.end());
  line.erase(line.find_last_not_of(" \t") + 1);
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t pos; (pos = line.find(';', start)) != std::string::npos; start = pos + 1) {
    parts.push_back(line.substr(start, pos - start));
  }
  parts.push_back(line.substr(start));
  return parts;
}

std::vector<MpibindCase> read_mpibind_expected(const std::string& path) {
  std::ifstream in(path);
  std::vector<MpibindCase> cases;
  std::vector<std::string> pending;
  nlohmann::json params;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# {", 0) == 0) {
      params = nlohmann::json::parse(line.substr(2));
      pending.clear();
      continue;
    }
    if (line.empty() || line[0] == '#' || params.is_null()) continue;
    pending.push_back(line);
    if (pending.size() == 4) {
      cases.push_back(
          {params["params"], pending[0], split_tasks(pending[2]), split_tasks(pending[3])});
      params = nullptr;
      pending.clear();
    }
  }
  return cases;
}

// The cores a CPU list touches, named by their first PU: mpibind picks how many PUs of each
// core to list from its thread count, this policy always hands out whole cores.
std::string cores_of(const NodeTopology& topo, const CpuList& cpus) {
  CpuList firsts;
  for (const CpuList& core : topo.cores) {
    const bool touched = std::any_of(core.begin(), core.end(), [&](unsigned pu) {
      return std::binary_search(cpus.begin(), cpus.end(), pu);
    });
    if (touched) firsts.push_back(core.front());
  }
  return format_cpu_list(firsts);
}

TEST(RealTopologies, LassenMatchesMpibindWhereThePoliciesAgree) {
  SKIP_WITHOUT_SHARED_TOPOLOGIES();
  const NodeTopology topo = load_topology(shared_topology("mpibind_coral-lassen.xml"));
  EXPECT_EQ(topo.cores.size(), 40u);  // PUs 0-7 and 88-95 are not in the machine's cpuset
  const auto cases = read_mpibind_expected(shared_topology("mpibind_expected.coral-lassen"));
  ASSERT_EQ(cases.size(), 12u);
  int compared = 0;
  for (const MpibindCase& c : cases) {
    // mpibind's restricted CPU sets have no counterpart here (Slurm's cgroup plays that role).
    if (!c.params["restr_set"].is_null()) continue;
    SCOPED_TRACE(c.description);
    const BindingPlan p = plan(topo, c.params["ntasks"].get<unsigned>());
    ASSERT_EQ(p.tasks.size(), c.cpus.size());
    for (std::size_t t = 0; t < p.tasks.size(); ++t) {
      EXPECT_EQ(cores_of(topo, parse_cpu_list(c.cpus[t], "mpibind cpus")),
                cores_of(topo, p.tasks[t].cpus))
          << "task " << t;
      EXPECT_EQ(c.gpus[t], p.tasks[t].cuda_visible_devices) << "task " << t;
    }
    if (c.params["smt"] == 4) {  // every hardware thread: the exact PU lists agree too
      for (std::size_t t = 0; t < p.tasks.size(); ++t) {
        EXPECT_EQ(c.cpus[t], format_cpu_list(p.tasks[t].cpus));
      }
    }
    ++compared;
  }
  EXPECT_EQ(compared, 9);
}

}  // namespace
}  // namespace dtrain::topology
