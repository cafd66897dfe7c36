// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "topology/load_io.hpp"
#include "topology_test_support.hpp"

namespace dtrain::topology {
namespace {

using testing::fixture;

void expect_resource_error_naming(const std::string& path, const std::string& detail) {
  try {
    load_topology(path);
    ADD_FAILURE() << "loaded " << path;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kResource);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(detail), std::string::npos) << e.what();
  }
}

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::path(::testing::TempDir()) / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(LoadTopology, MissingFileIsAResourceErrorNamingThePath) {
  expect_resource_error_naming("/nonexistent/dtrain/topology.xml", "No such file");
}

TEST(LoadTopology, CorruptXmlIsAResourceErrorNamingThePath) {
  expect_resource_error_naming(write_temp("dtrain-corrupt.xml", "<topology version=\"2.0\"><obj"),
                               "not a valid hwloc topology");
  expect_resource_error_naming(write_temp("dtrain-not-xml.xml", "this is not xml\n"),
                               "not a valid hwloc topology");
  expect_resource_error_naming(write_temp("dtrain-empty.xml", ""), "not a valid hwloc topology");
}

TEST(LoadTopology, ReadsTheDgxFixture) {
  const NodeTopology topo = load_topology(fixture("dgx-h100.xml"));
  EXPECT_TRUE(topo.has_io);
  EXPECT_EQ(topo.source, fixture("dgx-h100.xml"));
  EXPECT_EQ(topo.cores.size(), 112u);
  EXPECT_EQ(topo.cores[0], (CpuList{0, 112}));
  ASSERT_EQ(topo.numa_nodes.size(), 2u);
  EXPECT_EQ(format_cpu_list(topo.numa_nodes[1].cpus), "56-111,168-223");
  ASSERT_EQ(topo.gpus.size(), 8u);  // the ASPEED VGA is not a GPU
  EXPECT_EQ(topo.gpus[0].bus_id, "0000:1b:00.0");
  EXPECT_EQ(topo.gpus[0].cuda_name, "cuda0");
  EXPECT_EQ(topo.gpus[0].nvml_name, "nvml0");
  EXPECT_EQ(topo.gpus[0].model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(topo.gpus[7].bus_id, "0000:df:00.0");
  EXPECT_EQ(topo.gpus[7].placement.locality.numa_nodes, (std::vector<unsigned>{1}));
  EXPECT_EQ(topo.gpus[7].placement.locality.package, 1);
  // GPU -> downstream port -> switch upstream port -> root port -> host bridge.
  ASSERT_EQ(topo.gpus[0].placement.io_path.size(), 4u);
  EXPECT_EQ(topo.gpus[0].placement.io_path.back().kind, IoHop::Kind::kHostBridge);

  ASSERT_EQ(topo.nics.size(), 11u);  // 8 compute, 2 storage functions, 1 management port
  EXPECT_EQ(topo.nics[0].netdev, "eno3");
  EXPECT_TRUE(topo.nics[0].hca.empty());
  EXPECT_EQ(topo.nics[1].bus_id, "0000:18:00.0");
  EXPECT_EQ(topo.nics[1].hca, "mlx5_0");
  EXPECT_EQ(topo.nics[1].netdev, "ibp24s0");
  EXPECT_EQ(topo.nics[1].port, 1u);
}

TEST(LoadTopology, NoIoFixtureHasNoDevices) {
  const NodeTopology topo = load_topology(fixture("no-io.xml"));
  EXPECT_FALSE(topo.has_io);
  EXPECT_TRUE(topo.gpus.empty());
  EXPECT_TRUE(topo.nics.empty());
  EXPECT_EQ(topo.cores.size(), 16u);
  EXPECT_EQ(topo.numa_nodes.size(), 2u);
}

TEST(LoadTopology, DiscoversThisMachine) {
  const NodeTopology topo = load_topology("");
  EXPECT_EQ(topo.source, "this machine");
  EXPECT_FALSE(topo.cores.empty());
  EXPECT_FALSE(topo.numa_nodes.empty());
}

}  // namespace
}  // namespace dtrain::topology
