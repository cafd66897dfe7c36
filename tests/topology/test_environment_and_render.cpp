// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <sstream>

#include "topology/binding.hpp"
#include "topology/environment.hpp"
#include "topology/load_io.hpp"
#include "topology/render.hpp"
#include "topology_test_support.hpp"

namespace dtrain::topology {
namespace {

using testing::fixture;

BindingPlan plan(const NodeTopology& topo, unsigned tasks) {
  BindingRequest request;
  request.local_tasks = tasks;
  return plan_binding(topo, request);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// The DGX H100's eight compute-fabric HCAs; its storage pair mlx5_8/mlx5_9 is closest to no GPU.
constexpr const char* kDgxFabric =
    "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1";

TEST(BindingEnvironment, DgxTaskGetsTheWholeContract) {
  const NodeTopology topo = load_topology(fixture("dgx-h100.xml"));
  const BindingPlan p = plan(topo, 8);
  const std::vector<EnvVar> expected = {
      {"CUDA_VISIBLE_DEVICES", "5"},
      {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
      {"NCCL_IB_HCA", kDgxFabric},
      {"UCX_NET_DEVICES", "mlx5_5:1"},
      {"NCCL_SOCKET_IFNAME", "=ibp192s0"},
      {"DTRAIN_NIC", "mlx5_5:1"},
      {"OMP_NUM_THREADS", "14"},
      {"DTRAIN_CPU_LIST", "70-83,182-195"},
      {"DTRAIN_GPU_BUS_IDS", "0000:c3:00.0"},
      {"DTRAIN_CUDA_DEVICE", "0"},
  };
  EXPECT_EQ(binding_environment(p.tasks[5]), expected);
}

TEST(BindingEnvironment, ListsEveryNicOfAMultiGpuTask) {
  const BindingPlan p = plan(load_topology(fixture("dgx-h100.xml")), 2);
  const auto env = binding_environment(p.tasks[1]);
  const std::vector<EnvVar> expected = {
      {"CUDA_VISIBLE_DEVICES", "4,5,6,7"},
      {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
      {"NCCL_IB_HCA", kDgxFabric},
      {"UCX_NET_DEVICES", "mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1"},
      {"NCCL_SOCKET_IFNAME", "=ibp154s0,ibp192s0,ibp206s0,ibp220s0"},
      {"DTRAIN_NIC", "mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1"},
      {"OMP_NUM_THREADS", "56"},
      {"DTRAIN_CPU_LIST", "56-111,168-223"},
      {"DTRAIN_GPU_BUS_IDS", "0000:9d:00.0,0000:c3:00.0,0000:d1:00.0,0000:df:00.0"},
      {"DTRAIN_CUDA_DEVICE", "0"},
  };
  EXPECT_EQ(env, expected);
}

TEST(BindingEnvironment, UnknownPortKeepsTheExactNameAndSkipsUcx) {
  TaskBinding task;
  task.gpu_bus_ids = {"0000:01:00.0"};
  task.cuda_visible_devices = "0";
  task.nics = {{"0000:02:00.0", "mlx5_3", "", 0, Closeness::kPix}};
  task.node_nics = task.nics;
  task.cpus = {0, 1};
  task.cores = 1;
  const std::vector<EnvVar> expected = {
      {"CUDA_VISIBLE_DEVICES", "0"},
      {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
      {"NCCL_IB_HCA", "=mlx5_3"},
      {"DTRAIN_NIC", "mlx5_3"},
      {"OMP_NUM_THREADS", "1"},
      {"DTRAIN_CPU_LIST", "0-1"},
      {"DTRAIN_GPU_BUS_IDS", "0000:01:00.0"},
  };
  EXPECT_EQ(binding_environment(task), expected);
}

TEST(BindingEnvironment, CpuOnlyTaskGetsOnlyCpuVariables) {
  const BindingPlan p = plan(load_topology(fixture("no-io.xml")), 2);
  const std::vector<EnvVar> expected = {{"OMP_NUM_THREADS", "8"},
                                        {"DTRAIN_CPU_LIST", "8-15,24-31"}};
  EXPECT_EQ(binding_environment(p.tasks[1]), expected);
}

TEST(Render, BindingTableHasOneRowPerTaskTheWarningsAndTheNodeFabric) {
  const BindingPlan p = plan(load_topology(fixture("4gpu-missing-nic.xml")), 4);
  const auto lines = lines_of(render_binding_table(p));
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(words_of(lines[0])[0], "task");
  EXPECT_EQ(words_of(lines[1]), (std::vector<std::string>{"0", "0000:19:00.0", "0", "mlx5_0/ib0",
                                                          "PIX", "0-7", "8", "0"}));
  EXPECT_EQ(words_of(lines[4]), (std::vector<std::string>{"3", "0000:bb:00.0", "3", "mlx5_2/ib2",
                                                          "SYS", "24-31", "8", "3"}));
  EXPECT_EQ(lines[5].rfind("warning: GPU 0000:bb:00.0", 0), 0u) << lines[5];
  EXPECT_EQ(lines[6],
            "node fabric NICs (NCCL_IB_HCA of every GPU task): mlx5_0/ib0,mlx5_1/ib1,mlx5_2/ib2");
}

TEST(Render, ClosenessMatrixLooksLikeNvidiaSmiTopo) {
  const NodeTopology topo = load_topology(fixture("gpu-order-differs.xml"));
  const auto lines = lines_of(render_closeness_matrix(topo));
  ASSERT_GE(lines.size(), 5u);
  EXPECT_EQ(words_of(lines[0]), (std::vector<std::string>{"NIC0", "NIC1", "NIC2", "CPU", "Affinity",
                                                          "NUMA", "Affinity"}));
  EXPECT_EQ(words_of(lines[1]),
            (std::vector<std::string>{"GPU0", "PIX", "NODE", "NODE", "0-31", "0"}));
  EXPECT_EQ(words_of(lines[4]),
            (std::vector<std::string>{"GPU3", "NODE", "PIX", "PIX", "0-31", "0"}));
  const std::string text = render_closeness_matrix(topo);
  EXPECT_NE(text.find("GPU0: 0000:07:00.0 cuda2,nvml0"), std::string::npos) << text;
  EXPECT_NE(text.find("NIC2: eth0 0000:4d:00.0"), std::string::npos) << text;
}

TEST(Render, JsonCarriesTopologyTasksEnvironmentAndWarnings) {
  const NodeTopology topo = load_topology(fixture("4gpu-missing-nic.xml"));
  const nlohmann::json json = binding_to_json(topo, plan(topo, 4));
  EXPECT_EQ(json["source"], fixture("4gpu-missing-nic.xml"));
  ASSERT_EQ(json["gpus"].size(), 4u);
  EXPECT_EQ(json["gpus"][3]["bus_id"], "0000:bb:00.0");
  EXPECT_EQ(json["gpus"][3]["nic_closeness"], (nlohmann::json{"SYS", "SYS", "SYS"}));
  EXPECT_EQ(json["nics"][0]["hca"], "mlx5_0");
  EXPECT_EQ(json["tasks"][3]["nics"][0]["closeness"], "SYS");
  EXPECT_EQ(json["tasks"][3]["cpus"], "24-31");
  // The GPU without a NIC of its own uses mlx5_2; the node-wide list has every GPU's NIC.
  EXPECT_EQ(json["tasks"][3]["environment"]["DTRAIN_NIC"], "mlx5_2:1");
  EXPECT_EQ(json["tasks"][3]["environment"]["NCCL_IB_HCA"], "=mlx5_0:1,mlx5_1:1,mlx5_2:1");
  EXPECT_EQ(json["warnings"].size(), 1u);
}

}  // namespace
}  // namespace dtrain::topology
