#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/env_spill_io.hpp"
#include "core/error.hpp"
#include "core/net_io.hpp"
#include "core/node_environment.hpp"
#include "core/ports.hpp"
#include "core/step_plan.hpp"

using dtrain::Error;
using namespace dtrain::core;

namespace {

StepInputs step(const std::string& nodes, const std::string& tpn, const std::string& dist,
                std::uint32_t nnodes, std::uint32_t ntasks, std::uint32_t node,
                const std::vector<std::uint32_t>& local_ranks) {
  StepInputs in;
  in.job_id = 1234;
  in.step_id = 1;
  in.node_id = node;
  in.spec.nodelist = nodes;
  in.spec.tasks_per_node = tpn;
  in.spec.distribution = parse_distribution(dist);
  in.spec.nnodes = nnodes;
  in.spec.ntasks = ntasks;
  in.local_ranks = local_ranks;
  return in;
}

std::string value_of(const std::vector<EnvVar>& env, const std::string& name) {
  for (const auto& v : env) {
    if (v.name == name) return v.value;
  }
  return "<unset>";
}

std::string fake_resolve(const std::string& host) {
  return "10.0.0." + host.substr(4);
}

}  // namespace

TEST(StepPlan, EndpointsAreInRankOrderAndIdenticalOnEveryNode) {
  PluginConfig config;
  const FrameworkSet all;
  std::string first;
  const std::vector<std::vector<std::uint32_t>> gtids = {{0, 3, 4}, {1}, {2}};
  for (std::uint32_t node = 0; node < 3; ++node) {
    const auto plan = plan_step(step("node[1-3]", "3,1(x2)", "cyclic", 3, 5, node, gtids[node]),
                                config, all, fake_resolve);
    if (node == 0) first = plan.endpoints;
    EXPECT_EQ(plan.endpoints, first);
  }
  const auto plan = plan_step(step("node[1-3]", "3,1(x2)", "cyclic", 3, 5, 0, {0, 3, 4}), config,
                              all, fake_resolve);
  const auto p = plan.ports.endpoint_ports;
  const std::string expected =
      "10.0.0.1:" + std::to_string(p[0]) + ",10.0.0.2:" + std::to_string(p[0]) +
      ",10.0.0.3:" + std::to_string(p[0]) + ",10.0.0.1:" + std::to_string(p[1]) +
      ",10.0.0.1:" + std::to_string(p[2]);
  EXPECT_EQ(plan.endpoints, expected);
  EXPECT_EQ(plan.master_addr, "10.0.0.1");
}

TEST(StepPlan, RankEnvironmentCarriesEveryContractName) {
  PluginConfig config;
  config.address_mode = AddressMode::kName;
  config.host_suffix = "-ib";
  const auto plan = plan_step(step("node[1-4]", "4,2,1(x2)", "block", 4, 8, 1, {4, 5}), config,
                              FrameworkSet{}, fake_resolve);
  const auto env = rank_environment(plan, 5);
  EXPECT_EQ(value_of(env, "DTRAIN_RANK"), "5");
  EXPECT_EQ(value_of(env, "DTRAIN_LOCAL_RANK"), "1");
  EXPECT_EQ(value_of(env, "DTRAIN_LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(value_of(env, "DTRAIN_NODE_RANK"), "1");
  EXPECT_EQ(value_of(env, "DTRAIN_NNODES"), "4");
  EXPECT_EQ(value_of(env, "MASTER_ADDR"), "node1-ib");
  EXPECT_EQ(value_of(env, "GROUP_WORLD_SIZE"), "4");
  EXPECT_EQ(value_of(env, "ROLE_WORLD_SIZE"), "8");
  EXPECT_EQ(value_of(env, "PADDLE_RANK_IN_NODE"), "1");
  EXPECT_EQ(value_of(env, "PADDLE_LOCAL_SIZE"), "2");
  EXPECT_EQ(value_of(env, "PADDLE_NNODES"), "4");
  EXPECT_EQ(value_of(env, "PADDLE_MASTER"), "node1-ib:" + std::to_string(plan.ports.master));
  const std::string current = "node2-ib:" + std::to_string(plan.ports.endpoint_ports[1]);
  EXPECT_EQ(value_of(env, "DTRAIN_CURRENT_ENDPOINT"), current);
  EXPECT_EQ(value_of(env, "PADDLE_CURRENT_ENDPOINT"), current);
  const auto tf = value_of(env, "TF_CONFIG");
  EXPECT_EQ(tf.rfind(R"({"cluster":{"worker":["node1-ib:)", 0), 0u) << tf;
  EXPECT_NE(tf.find(R"("task":{"type":"worker","index":5}})"), std::string::npos) << tf;
}

TEST(StepPlan, Ipv6AddressesAreBracketed) {
  PluginConfig config;
  const auto plan =
      plan_step(step("n[1-2]", "1(x2)", "block", 2, 2, 0, {0}), config, FrameworkSet{},
                [](const std::string&) { return std::string("fd00::1"); });
  EXPECT_EQ(plan.endpoints.rfind("[fd00::1]:", 0), 0u);
}

TEST(StepPlan, GtidsMismatchStopsThePlan) {
  PluginConfig config;
  EXPECT_THROW(plan_step(step("node[1-3]", "3,1(x2)", "block", 3, 5, 0, {0, 3, 4}), config,
                         FrameworkSet{}, fake_resolve),
               Error);
  EXPECT_THROW(plan_step(step("node[1-3]", "3,1(x2)", "block", 3, 5, 9, {0}), config,
                         FrameworkSet{}, fake_resolve),
               Error);
}

TEST(Netio, ResolvesLocalhostAndNamesTheBadHost) {
  EXPECT_EQ(resolve_host("localhost").rfind("127.", 0) == 0 || resolve_host("localhost") == "::1",
            true);
  try {
    resolve_host("no-such-host.invalid");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-host.invalid"), std::string::npos);
  }
}

TEST(Netio, DetectsAListeningPort) {
  // Bind an ephemeral port on loopback, then ask.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const auto port = ntohs(addr.sin_port);
  EXPECT_TRUE(port_in_use("127.0.0.1", port));
  close(fd);
  EXPECT_FALSE(port_in_use("127.0.0.1", port));
  EXPECT_FALSE(port_in_use("not-an-address", port));
}

TEST(EnvSpill, OnlyOversizedValuesMoveAndSharedOnesAreWrittenOnce) {
  const auto base =
      std::filesystem::temp_directory_path() / ("dtrain-spill-" + std::to_string(getpid()));
  std::filesystem::create_directories(base);
  const auto dir = make_step_env_dir(base.string(), 5, 2);
  EXPECT_EQ(dir, base.string() + "/dtrain-" + std::to_string(getuid()) + "-5.2");
  EXPECT_EQ(make_step_env_dir(base.string(), 5, 2), dir);  // reusable
  // 1000 ranks with 200-character host names: the endpoint list is about 207 KB. Node 0 runs
  // ranks 0 and 1.
  PluginConfig config;
  config.address_mode = AddressMode::kName;
  const std::string name(200, 'n');
  auto inputs = step(name + "[1-2]", "2,998", "block", 2, 1000, 0, {0, 1});
  inputs.reserved_ports = "40000-40998";  // derived ports stop at port_block - 1 tasks per node
  const auto plan = plan_step(inputs, config, FrameworkSet{}, nullptr);
  int asked = 0;
  auto env = node_environment(plan, 0, {}, [&] {
    ++asked;
    return dir;
  });
  EXPECT_EQ(asked, 1);
  ASSERT_EQ(env.tasks.size(), 2u);
  EXPECT_EQ(value_of(env.tasks[0], "DTRAIN_RANK"), "0");
  EXPECT_EQ(value_of(env.tasks[0], "DTRAIN_ENDPOINTS_FILE"), dir + "/DTRAIN_ENDPOINTS");
  EXPECT_EQ(value_of(env.tasks[1], "DTRAIN_ENDPOINTS_FILE"), dir + "/DTRAIN_ENDPOINTS");
  EXPECT_EQ(value_of(env.tasks[1], "DTRAIN_ENDPOINTS"), "<unset>");
  // TF_CONFIG names the task's own index: one file per task after the first.
  EXPECT_EQ(value_of(env.tasks[0], "TF_CONFIG_FILE"), dir + "/TF_CONFIG");
  EXPECT_EQ(value_of(env.tasks[1], "TF_CONFIG_FILE"), dir + "/TF_CONFIG.1");
  EXPECT_NE(env.spill_warning.find("DTRAIN_ENDPOINTS, PADDLE_TRAINER_ENDPOINTS, TF_CONFIG"),
            std::string::npos)
      << env.spill_warning;
  ASSERT_EQ(env.files.size(), 4u);
  write_spill_files(env.files);
  std::ifstream in(dir + "/TF_CONFIG.1");
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, rank_environment(plan, 1).back().value);
  EXPECT_NE(content.find(R"("task":{"type":"worker","index":1})"), std::string::npos);
  // A file, or a directory someone else made, is refused.
  std::ofstream(base / "trap").put('x');
  EXPECT_THROW(make_step_env_dir((base / "trap").string(), 1, 1), Error);
  std::filesystem::permissions(dir, std::filesystem::perms::all);
  EXPECT_THROW(make_step_env_dir(base.string(), 5, 2), Error);
  std::filesystem::remove_all(base);
}

TEST(NodeEnvironment, MergesTheBindingAndAddsPaddleDeviceRules) {
  PluginConfig config;
  config.address_mode = AddressMode::kName;
  const auto plan = plan_step(step("node[1-4]", "4,2,1(x2)", "block", 4, 8, 1, {4, 5}), config,
                              FrameworkSet{}, nullptr);
  const auto no_spill = []() -> std::string {
    ADD_FAILURE() << "nothing should spill";
    return "/nonexistent";
  };
  NodeBindingEnv binding;
  binding.tasks = {{{{"CUDA_VISIBLE_DEVICES", "0,1", true}}, 2},
                   {{{"OMP_NUM_THREADS", "4", true}}, 0}};
  const auto env = node_environment(plan, 1, binding, no_spill);
  ASSERT_EQ(env.tasks.size(), 2u);
  EXPECT_EQ(value_of(env.tasks[0], "DTRAIN_RANK"), "4");
  EXPECT_EQ(value_of(env.tasks[0], "CUDA_VISIBLE_DEVICES"), "0,1");
  EXPECT_EQ(value_of(env.tasks[0], "FLAGS_selected_gpus"), "0,1");
  EXPECT_EQ(value_of(env.tasks[0], "PADDLE_DISTRI_BACKEND"), "<unset>");
  EXPECT_EQ(value_of(env.tasks[1], "OMP_NUM_THREADS"), "4");
  EXPECT_EQ(value_of(env.tasks[1], "PADDLE_DISTRI_BACKEND"), "gloo");
  EXPECT_TRUE(env.files.empty());
  EXPECT_TRUE(env.spill_warning.empty());
  // Unbound: a GPU is assumed only where CUDA_VISIBLE_DEVICES was set.
  const auto unbound = node_environment(plan, 1, NodeBindingEnv{{}, true}, no_spill);
  EXPECT_EQ(value_of(unbound.tasks[0], "PADDLE_DISTRI_BACKEND"), "<unset>");
  EXPECT_EQ(value_of(unbound.tasks[0], "FLAGS_selected_gpus"), "<unset>");
  const auto torch_only = plan_step(step("node[1-4]", "4,2,1(x2)", "block", 4, 8, 1, {4, 5}),
                                    config, parse_frameworks("torch"), nullptr);
  EXPECT_EQ(
      value_of(node_environment(torch_only, 1, {}, no_spill).tasks[1], "PADDLE_DISTRI_BACKEND"),
      "<unset>");
  EXPECT_THROW(node_environment(plan, 4, {}, no_spill), Error);
}

TEST(EnvSpill, LimitMatchesExecve) {
  EXPECT_FALSE(exceeds_exec_limit({"A", std::string(kMaxEnvStringBytes - 3, 'x')}));
  EXPECT_TRUE(exceeds_exec_limit({"A", std::string(kMaxEnvStringBytes - 2, 'x')}));
}
