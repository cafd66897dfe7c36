// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "core/config.hpp"
#include "core/error.hpp"

using dtrain::Error;
using namespace dtrain::core;

namespace {
std::string error_of(const std::vector<std::string>& args) {
  try {
    parse_plugin_args(args);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(PluginConfig, DefaultsAreSensible) {
  const auto c = parse_plugin_args({});
  EXPECT_FALSE(c.enabled_by_default);
  EXPECT_EQ(c.frameworks, FrameworkSet{});
  EXPECT_EQ(c.address_mode, AddressMode::kAddress);
  EXPECT_EQ(c.ip_max_nodes, 128u);
  EXPECT_EQ(c.ports.first, 20000);
  EXPECT_TRUE(c.bind);
  EXPECT_FALSE(c.gpus_from_slurm_only);
  EXPECT_EQ(c.gpu_view, GpuView::kAuto);
}

TEST(PluginConfig, ParsesEveryKey) {
  const auto c = parse_plugin_args({"enable=always", "frameworks=torch,tf", "ports=30000-31023",
                                    "port_block=16", "address=name", "ip_max_nodes=4096",
                                    "suffix=-ib", "topology=/etc/dtrain/dgx.xml", "bind=off",
                                    "gpus=slurm", "gpu_view=task", "check_ports=no"});
  EXPECT_TRUE(c.enabled_by_default);
  EXPECT_TRUE(c.frameworks.torch);
  EXPECT_FALSE(c.frameworks.paddle);
  EXPECT_EQ(c.ports.first, 30000);
  EXPECT_EQ(c.ports.last, 31023);
  EXPECT_EQ(c.port_block, 16u);
  EXPECT_EQ(c.address_mode, AddressMode::kName);
  EXPECT_EQ(c.ip_max_nodes, 4096u);
  EXPECT_EQ(c.host_suffix, "-ib");
  EXPECT_EQ(c.topology, (TopologySource{TopologySource::Kind::kFile, "/etc/dtrain/dgx.xml"}));
  EXPECT_EQ(c.topology_cache, TopologyCache{});
  EXPECT_FALSE(c.bind);
  EXPECT_TRUE(c.gpus_from_slurm_only);
  EXPECT_EQ(c.gpu_view, GpuView::kTask);
  EXPECT_FALSE(c.check_ports);
}

TEST(PluginConfig, ErrorsNameTheKey) {
  EXPECT_NE(error_of({"colour=blue"}).find("'colour'"), std::string::npos);
  EXPECT_NE(error_of({"colour=blue"}).find("valid keys"), std::string::npos);
  EXPECT_NE(error_of({"ports=1-2"}).find("ports"), std::string::npos);
  EXPECT_NE(error_of({"ports=40000-30000"}).find("'ports'"), std::string::npos);
  EXPECT_NE(error_of({"ports=30000"}).find("'ports'"), std::string::npos);
  EXPECT_NE(error_of({"ports=30000-99999"}).find("too large"), std::string::npos);
  EXPECT_NE(error_of({"enable=sometimes"}).find("'enable'"), std::string::npos);
  EXPECT_NE(error_of({"address=dns"}).find("'address'"), std::string::npos);
  EXPECT_NE(error_of({"ip_max_nodes=0"}).find("'ip_max_nodes'"), std::string::npos);
  EXPECT_NE(error_of({"ip_max_nodes=many"}).find("'ip_max_nodes'"), std::string::npos);
  EXPECT_NE(error_of({"suffix=a b"}).find("'suffix'"), std::string::npos);
  EXPECT_NE(error_of({"topology=relative.xml"}).find("absolute path"), std::string::npos);
  EXPECT_NE(error_of({"bind=maybe"}).find("'bind'"), std::string::npos);
  EXPECT_NE(error_of({"gpus=all"}).find("gpus=slurm"), std::string::npos);
  EXPECT_NE(error_of({"novalue"}).find("key=value"), std::string::npos);
  EXPECT_NE(error_of({"=x"}).find("key=value"), std::string::npos);
  EXPECT_NE(error_of({"bind=on", "bind=off"}).find("twice"), std::string::npos);
  EXPECT_NE(error_of({"frameworks=mxnet"}).find("valid values"), std::string::npos);
  EXPECT_NE(error_of({"ports=30000-30010", "port_block=64"}).find("port_block"), std::string::npos);
}

TEST(Frameworks, ParsesListsAndAliases) {
  EXPECT_EQ(parse_frameworks(""), FrameworkSet{});
  EXPECT_EQ(parse_frameworks("all"), FrameworkSet{});
  EXPECT_EQ(parse_frameworks("tensorflow"), (FrameworkSet{false, false, true, false}));
  EXPECT_EQ(parse_frameworks("torch,paddle"), (FrameworkSet{true, true, false, false}));
  EXPECT_EQ(to_string(FrameworkSet{true, false, true, false}), "torch,tf");
  EXPECT_THROW(parse_frameworks("torch,,tf"), Error);
  EXPECT_THROW(parse_frameworks("Torch"), Error);
  EXPECT_THROW(parse_frameworks(std::string(300, 'x')), Error);
  EXPECT_EQ(parse_frameworks("jax"), (FrameworkSet{false, false, false, true}));
  EXPECT_EQ(to_string(FrameworkSet{}), "torch,paddle,tf,jax");
}

TEST(GpuViewOption, ParsesTheThreeViewsAndNamesTheInputOtherwise) {
  EXPECT_EQ(parse_gpu_view("auto", "x"), GpuView::kAuto);
  EXPECT_EQ(parse_gpu_view("node", "x"), GpuView::kNode);
  EXPECT_EQ(parse_gpu_view("task", "x"), GpuView::kTask);
  EXPECT_EQ(to_string(GpuView::kNode), "node");
  try {
    parse_gpu_view("isolated", "--distributed-train-gpu-view");
    FAIL() << "accepted 'isolated'";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("--distributed-train-gpu-view"), std::string::npos) << text;
    EXPECT_NE(text.find("auto, node, task"), std::string::npos) << text;
  }
  EXPECT_THROW(parse_plugin_args({"gpu_view=all"}), Error);
}
