// SPDX-License-Identifier: Apache-2.0
// Exact bindings for the hand-written fixtures in tests/fixtures/topologies.

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "topology/binding.hpp"
#include "topology/load_io.hpp"
#include "topology_test_support.hpp"

namespace dtrain::topology {
namespace {

using testing::fixture;

const std::vector<std::string> kDgxGpus = {"0000:1b:00.0", "0000:43:00.0", "0000:52:00.0",
                                           "0000:61:00.0", "0000:9d:00.0", "0000:c3:00.0",
                                           "0000:d1:00.0", "0000:df:00.0"};
const std::vector<std::string> kDgxNetdevs = {"ibp24s0",  "ibp64s0",  "ibp79s0",  "ibp94s0",
                                              "ibp154s0", "ibp192s0", "ibp206s0", "ibp220s0"};

const NodeTopology& dgx() {
  static const NodeTopology topo = load_topology(fixture("dgx-h100.xml"));
  return topo;
}

BindingPlan plan(const NodeTopology& topo, unsigned tasks) {
  BindingRequest request;
  request.local_tasks = tasks;
  return plan_binding(topo, request);
}

std::string cpus(const TaskBinding& task) {
  return format_cpu_list(task.cpus);
}

std::vector<std::string> hcas(const TaskBinding& task) {
  std::vector<std::string> names;
  for (const auto& nic : task.nics) names.push_back(nic.hca);
  return names;
}

TEST(DgxH100, EightTasksGetOneGpuItsSwitchNicAndAQuarterSocket) {
  const BindingPlan p = plan(dgx(), 8);
  EXPECT_TRUE(p.warnings.empty());
  ASSERT_EQ(p.tasks.size(), 8u);
  for (unsigned t = 0; t < 8; ++t) {
    const TaskBinding& task = p.tasks[t];
    SCOPED_TRACE("task " + std::to_string(t));
    EXPECT_EQ(task.local_rank, t);
    EXPECT_EQ(task.gpu_bus_ids, std::vector<std::string>{kDgxGpus[t]});
    EXPECT_EQ(task.cuda_visible_devices, std::to_string(t));
    ASSERT_EQ(task.nics.size(), 1u);
    EXPECT_EQ(task.nics[0].hca, "mlx5_" + std::to_string(t));  // never storage mlx5_8/9 or eno3
    EXPECT_EQ(task.nics[0].netdev, kDgxNetdevs[t]);
    EXPECT_EQ(task.nics[0].port, 1u);
    EXPECT_EQ(task.nics[0].closeness, Closeness::kPix);
    const unsigned first = 14 * t;
    EXPECT_EQ(cpus(task), std::to_string(first) + "-" + std::to_string(first + 13) + "," +
                              std::to_string(112 + first) + "-" + std::to_string(125 + first));
    EXPECT_EQ(task.cores, 14u);
    EXPECT_EQ(task.numa_nodes, std::vector<unsigned>{t / 4});
  }
}

TEST(DgxH100, TwoTasksGetFourNumaLocalGpusEach) {
  const BindingPlan p = plan(dgx(), 2);
  EXPECT_TRUE(p.warnings.empty());
  ASSERT_EQ(p.tasks.size(), 2u);
  EXPECT_EQ(p.tasks[0].gpu_bus_ids,
            std::vector<std::string>(kDgxGpus.begin(), kDgxGpus.begin() + 4));
  EXPECT_EQ(p.tasks[1].gpu_bus_ids, std::vector<std::string>(kDgxGpus.begin() + 4, kDgxGpus.end()));
  EXPECT_EQ(p.tasks[0].cuda_visible_devices, "0,1,2,3");
  EXPECT_EQ(p.tasks[1].cuda_visible_devices, "4,5,6,7");
  EXPECT_EQ(hcas(p.tasks[0]), (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}));
  EXPECT_EQ(hcas(p.tasks[1]), (std::vector<std::string>{"mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"}));
  EXPECT_EQ(cpus(p.tasks[0]), "0-55,112-167");
  EXPECT_EQ(cpus(p.tasks[1]), "56-111,168-223");
  EXPECT_EQ(p.tasks[0].cores, 56u);
  EXPECT_EQ(p.tasks[1].numa_nodes, std::vector<unsigned>{1});
}

TEST(DgxH100, SixteenTasksShareEachGpuInPairsWithDisjointCores) {
  const BindingPlan p = plan(dgx(), 16);
  ASSERT_EQ(p.tasks.size(), 16u);
  for (unsigned t = 0; t < 16; ++t) {
    SCOPED_TRACE("task " + std::to_string(t));
    EXPECT_EQ(p.tasks[t].gpu_bus_ids, std::vector<std::string>{kDgxGpus[t / 2]});
    EXPECT_EQ(p.tasks[t].cuda_visible_devices, std::to_string(t / 2));
    EXPECT_EQ(hcas(p.tasks[t]), std::vector<std::string>{"mlx5_" + std::to_string(t / 2)});
    EXPECT_EQ(p.tasks[t].cores, 7u);
    EXPECT_EQ(p.tasks[t].numa_nodes, std::vector<unsigned>{t / 8});
  }
  EXPECT_EQ(cpus(p.tasks[0]), "0-6,112-118");
  EXPECT_EQ(cpus(p.tasks[1]), "7-13,119-125");
  EXPECT_EQ(cpus(p.tasks[15]), "105-111,217-223");
}

TEST(DgxH100, ThreeTasksOnEightGpusGiveTheExtraGpusToTheFirstTasks) {
  const BindingPlan p = plan(dgx(), 3);
  ASSERT_EQ(p.tasks.size(), 3u);
  EXPECT_EQ(p.tasks[0].cuda_visible_devices, "0,1,2");
  EXPECT_EQ(p.tasks[1].cuda_visible_devices, "3,4,5");
  EXPECT_EQ(p.tasks[2].cuda_visible_devices, "6,7");
  // Task 1 has GPUs in both sockets, so it shares each socket's cores with its neighbour.
  EXPECT_EQ(cpus(p.tasks[0]), "0-27,112-139");
  EXPECT_EQ(cpus(p.tasks[1]), "28-83,140-195");
  EXPECT_EQ(cpus(p.tasks[2]), "84-111,196-223");
  EXPECT_EQ(p.tasks[1].numa_nodes, (std::vector<unsigned>{0, 1}));
}

TEST(DgxH100, TwelveTasksOnEightGpusGiveTheExtraTasksToTheFirstGpus) {
  const BindingPlan p = plan(dgx(), 12);
  const std::vector<std::string> expected = {"0", "0", "1", "1", "2", "2",
                                             "3", "3", "4", "5", "6", "7"};
  for (unsigned t = 0; t < 12; ++t) EXPECT_EQ(p.tasks[t].cuda_visible_devices, expected[t]) << t;
  // Socket 0 is shared by 8 tasks (7 cores each), socket 1 by 4 (14 cores each).
  EXPECT_EQ(p.tasks[0].cores, 7u);
  EXPECT_EQ(p.tasks[8].cores, 14u);
  EXPECT_EQ(cpus(p.tasks[8]), "56-69,168-181");
}

TEST(DgxH100, RestrictedGpusAreNumberedInTheTasksOwnNumbering) {
  BindingRequest request;
  request.local_tasks = 3;
  request.allowed_gpu_bus_ids =
      std::vector<std::string>{"0000:D1:00.0", "00000000:52:00.0", "0000:61:00.0"};
  const BindingPlan constrained = plan_binding(dgx(), request);
  ASSERT_EQ(constrained.tasks.size(), 3u);
  EXPECT_EQ(constrained.tasks[0].gpu_bus_ids, std::vector<std::string>{"0000:52:00.0"});
  EXPECT_EQ(constrained.tasks[1].gpu_bus_ids, std::vector<std::string>{"0000:61:00.0"});
  EXPECT_EQ(constrained.tasks[2].gpu_bus_ids, std::vector<std::string>{"0000:d1:00.0"});
  EXPECT_EQ(constrained.tasks[0].cuda_visible_devices, "0");
  EXPECT_EQ(constrained.tasks[1].cuda_visible_devices, "1");
  EXPECT_EQ(constrained.tasks[2].cuda_visible_devices, "2");
  EXPECT_EQ(hcas(constrained.tasks[2]), std::vector<std::string>{"mlx5_6"});
  // Tasks 0 and 1 share socket 0; task 2 has socket 1 to itself.
  EXPECT_EQ(cpus(constrained.tasks[0]), "0-27,112-139");
  EXPECT_EQ(cpus(constrained.tasks[2]), "56-111,168-223");

  request.numbering = GpuNumbering::kWholeNode;
  const BindingPlan whole = plan_binding(dgx(), request);
  EXPECT_EQ(whole.tasks[0].cuda_visible_devices, "2");
  EXPECT_EQ(whole.tasks[1].cuda_visible_devices, "3");
  EXPECT_EQ(whole.tasks[2].cuda_visible_devices, "6");
}

TEST(DgxH100, RestrictedGpusByIndexMatchRestrictionByBusId) {
  BindingRequest request;
  request.local_tasks = 1;
  request.allowed_gpu_indices = parse_gpu_index_list("6,2,3", "CUDA_VISIBLE_DEVICES");
  const BindingPlan p = plan_binding(dgx(), request);
  ASSERT_EQ(p.tasks.size(), 1u);
  EXPECT_EQ(p.tasks[0].gpu_bus_ids,
            (std::vector<std::string>{"0000:52:00.0", "0000:61:00.0", "0000:d1:00.0"}));
  EXPECT_EQ(p.tasks[0].cuda_visible_devices, "0,1,2");
  EXPECT_EQ(hcas(p.tasks[0]), (std::vector<std::string>{"mlx5_2", "mlx5_3", "mlx5_6"}));
  EXPECT_EQ(cpus(p.tasks[0]), "0-223");
}

TEST(DgxH100, AnEmptyAllowedListBindsCpusOnly) {
  BindingRequest request;
  request.local_tasks = 2;
  request.allowed_gpu_bus_ids = std::vector<std::string>{};
  const BindingPlan p = plan_binding(dgx(), request);
  EXPECT_TRUE(p.warnings.empty());
  EXPECT_TRUE(p.tasks[0].gpu_bus_ids.empty());
  EXPECT_TRUE(p.tasks[0].nics.empty());
  EXPECT_EQ(cpus(p.tasks[0]), "0-55,112-167");
}

TEST(DgxH100, BadRequestsAreRefusedWithTheRightKind) {
  const auto kind_of = [](const BindingRequest& request) {
    try {
      plan_binding(dgx(), request);
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::kInternal;
  };
  BindingRequest request;
  request.local_tasks = 0;
  EXPECT_EQ(kind_of(request), ErrorKind::kInvalidInput);
  request.local_tasks = 1;
  request.allowed_gpu_bus_ids = std::vector<std::string>{"0000:aa:00.0"};
  EXPECT_EQ(kind_of(request), ErrorKind::kMismatch);
  request.allowed_gpu_bus_ids = std::vector<std::string>{"GPU-1234"};
  EXPECT_EQ(kind_of(request), ErrorKind::kInvalidInput);
  request.allowed_gpu_bus_ids.reset();
  request.allowed_gpu_indices = std::vector<unsigned>{8};
  EXPECT_EQ(kind_of(request), ErrorKind::kMismatch);
  request.allowed_gpu_bus_ids = std::vector<std::string>{"0000:1b:00.0"};
  EXPECT_EQ(kind_of(request), ErrorKind::kInvalidInput);
  EXPECT_THROW(parse_gpu_index_list("GPU-8f3a,1", "CUDA_VISIBLE_DEVICES"), Error);
}

TEST(FourGpuMissingNic, TheGpuWithoutALocalNicIsNamedInOneWarning) {
  const BindingPlan p = plan(load_topology(fixture("4gpu-missing-nic.xml")), 4);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("GPU 0000:bb:00.0 has no NIC in its NUMA domain"), std::string::npos)
      << p.warnings[0];
  const std::vector<std::string> gpus = {"0000:19:00.0", "0000:3b:00.0", "0000:9b:00.0",
                                         "0000:bb:00.0"};
  for (unsigned t = 0; t < 4; ++t) {
    EXPECT_EQ(p.tasks[t].gpu_bus_ids, std::vector<std::string>{gpus[t]});
    EXPECT_EQ(p.tasks[t].numa_nodes, std::vector<unsigned>{t});
    EXPECT_EQ(cpus(p.tasks[t]), std::to_string(8 * t) + "-" + std::to_string(8 * t + 7));
  }
  EXPECT_EQ(hcas(p.tasks[0]), std::vector<std::string>{"mlx5_0"});
  EXPECT_EQ(hcas(p.tasks[2]), std::vector<std::string>{"mlx5_2"});
  // The NIC-less GPU borrows the NIC of its own socket rather than one across sockets.
  ASSERT_EQ(p.tasks[3].nics.size(), 1u);
  EXPECT_EQ(p.tasks[3].nics[0].hca, "mlx5_2");
  EXPECT_EQ(p.tasks[3].nics[0].closeness, Closeness::kSys);
}

TEST(GpuOrderDiffers, CudaVisibleDevicesFollowsPciOrderNotCudaNames) {
  const NodeTopology topo = load_topology(fixture("gpu-order-differs.xml"));
  ASSERT_EQ(topo.gpus.size(), 4u);
  EXPECT_EQ(topo.gpus[0].cuda_name, "cuda2");
  EXPECT_EQ(topo.gpus[0].nvml_name, "nvml0");
  EXPECT_EQ(topo.gpus[1].cuda_name, "cuda0");
  const BindingPlan p = plan(topo, 4);
  EXPECT_TRUE(p.warnings.empty());
  const std::vector<std::string> gpus = {"0000:07:00.0", "0000:0b:00.0", "0000:48:00.0",
                                         "0000:4c:00.0"};
  for (unsigned t = 0; t < 4; ++t) {
    EXPECT_EQ(p.tasks[t].gpu_bus_ids, std::vector<std::string>{gpus[t]});
    EXPECT_EQ(p.tasks[t].cuda_visible_devices, std::to_string(t));
    EXPECT_EQ(p.tasks[t].cores, 4u);
  }
  // Two NICs for four GPUs: each switch's NIC serves its two GPUs; the Ethernet port on
  // switch B is never used although it is as close.
  EXPECT_EQ(hcas(p.tasks[0]), std::vector<std::string>{"mlx5_0"});
  EXPECT_EQ(hcas(p.tasks[1]), std::vector<std::string>{"mlx5_0"});
  EXPECT_EQ(hcas(p.tasks[2]), std::vector<std::string>{"mlx5_1"});
  EXPECT_EQ(hcas(p.tasks[3]), std::vector<std::string>{"mlx5_1"});
  EXPECT_EQ(cpus(p.tasks[0]), "0-3,16-19");
  EXPECT_EQ(cpus(p.tasks[3]), "12-15,28-31");
}

TEST(NoIo, CpuOnlyPlanWithOneWarning) {
  const NodeTopology topo = load_topology(fixture("no-io.xml"));
  BindingRequest request;
  request.local_tasks = 4;
  request.allowed_gpu_indices = std::vector<unsigned>{0, 1};  // ignored: nothing to match them to
  const BindingPlan p = plan_binding(topo, request);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("no I/O information"), std::string::npos);
  const std::vector<std::string> expected = {"0-3,16-19", "4-7,20-23", "8-11,24-27", "12-15,28-31"};
  for (unsigned t = 0; t < 4; ++t) {
    EXPECT_TRUE(p.tasks[t].gpu_bus_ids.empty());
    EXPECT_TRUE(p.tasks[t].nics.empty());
    EXPECT_EQ(cpus(p.tasks[t]), expected[t]);
    EXPECT_EQ(p.tasks[t].numa_nodes, std::vector<unsigned>{t / 2});
  }
}

TEST(NoIo, UnevenTaskCountsNeverStraddleNumaNodes) {
  const NodeTopology topo = load_topology(fixture("no-io.xml"));
  const BindingPlan one = plan(topo, 1);
  EXPECT_EQ(cpus(one.tasks[0]), "0-31");
  EXPECT_EQ(one.tasks[0].cores, 16u);
  const BindingPlan three = plan(topo, 3);
  EXPECT_EQ(cpus(three.tasks[0]), "0-7,16-23");
  EXPECT_EQ(cpus(three.tasks[1]), "8-11,24-27");
  EXPECT_EQ(cpus(three.tasks[2]), "12-15,28-31");
  // More tasks than cores: single PUs, then shared PUs with a warning.
  const BindingPlan many = plan(topo, 32);
  EXPECT_EQ(cpus(many.tasks[0]), "0");
  EXPECT_EQ(cpus(many.tasks[1]), "16");
  EXPECT_EQ(many.warnings.size(), 1u);
  const BindingPlan too_many = plan(topo, 40);
  EXPECT_EQ(too_many.warnings.size(), 3u);  // no I/O, and one per oversubscribed NUMA node
  for (const TaskBinding& task : too_many.tasks) EXPECT_EQ(task.cpus.size(), 1u);
}

TEST(HandWrittenTopology, PlansWithoutAnyHwloc) {
  // Two GPUs on one host bridge, one HCA without a known port, two cores.
  NodeTopology topo;
  topo.source = "hand-written";
  topo.has_io = true;
  topo.cores = {{0, 2}, {1, 3}};
  topo.numa_nodes = {{0, {0, 1, 2, 3}}};
  Locality locality{1, 0, {0}, {0, 1, 2, 3}};
  topo.gpus = {{"0000:02:00.0", "", "", "A", {{{IoHop::Kind::kHostBridge, 9}}, locality}},
               {"0000:01:00.0", "", "", "B", {{{IoHop::Kind::kHostBridge, 9}}, locality}}};
  topo.nics = {{"0000:03:00.0", "mlx5_0", "", 0, {{{IoHop::Kind::kHostBridge, 9}}, locality}}};
  const BindingPlan p = plan(topo, 2);
  EXPECT_EQ(p.tasks[0].gpu_bus_ids, std::vector<std::string>{"0000:01:00.0"});  // PCI order
  EXPECT_EQ(p.tasks[0].nics[0].closeness, Closeness::kPhb);
  EXPECT_EQ(cpus(p.tasks[0]), "0,2");
  EXPECT_EQ(cpus(p.tasks[1]), "1,3");
}

}  // namespace
}  // namespace dtrain::topology
