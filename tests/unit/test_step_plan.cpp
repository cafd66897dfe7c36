// SPDX-License-Identifier: Apache-2.0
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/memory_file.hpp"
#include "core/memory_file_io.hpp"
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
  EXPECT_EQ(plan.endpoints_hash, endpoints_hash(expected));
  EXPECT_EQ(value_of(rank_environment(plan, 3), "DTRAIN_ENDPOINTS_HASH"), plan.endpoints_hash);
}

TEST(StepPlan, EndpointsHashIsXxh3InHex) {
  EXPECT_EQ(endpoints_hash(""), "2d06800538d394c2");  // XXH3_64bits of the empty input
  EXPECT_EQ(endpoints_hash("10.0.0.1:20000").size(), 16u);
  EXPECT_NE(endpoints_hash("10.0.0.1:20000,10.0.0.2:20000"),
            endpoints_hash("10.0.0.2:20000,10.0.0.1:20000"));
}

TEST(StepPlan, ALoopbackAddressInAMultiNodeStepIsAnErrorNamingTheHostsLine) {
  PluginConfig config;
  const auto debian = [](const std::string& host) {
    return host == "node1" ? std::string("127.0.1.1") : "10.0.0." + host.substr(4);
  };
  const auto hosts = [](const std::string& host) { return "127.0.1.1 " + host; };
  try {
    plan_step(step("node[1-2]", "1(x2)", "block", 2, 2, 0, {0}), config, FrameworkSet{}, debian,
              hosts);
    FAIL() << "a loopback endpoint was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("node node1 resolves to the loopback address 127.0.1.1 on node1"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("'127.0.1.1 node1'"), std::string::npos) << what;
    EXPECT_NE(what.find("loopback=allow"), std::string::npos) << what;
  }
  // One node, loopback=allow, or address=name: no error.
  EXPECT_NO_THROW(plan_step(step("node1", "2", "block", 1, 2, 0, {0, 1}), config, FrameworkSet{},
                            debian, hosts));
  PluginConfig allow;
  allow.allow_loopback = true;
  EXPECT_EQ(plan_step(step("node[1-2]", "1(x2)", "block", 2, 2, 0, {0}), allow, FrameworkSet{},
                      debian, hosts)
                .master_addr,
            "127.0.1.1");
  PluginConfig names;
  names.address_mode = AddressMode::kName;
  EXPECT_NO_THROW(plan_step(step("node[1-2]", "1(x2)", "block", 2, 2, 0, {0}), names,
                            FrameworkSet{}, debian, hosts));
  EXPECT_TRUE(is_loopback_address("::1"));
  EXPECT_TRUE(is_loopback_address("127.0.0.1"));
  EXPECT_FALSE(is_loopback_address("10.127.0.1"));
}

TEST(StepPlan, NodeAliasesGiveCloudNodesTheirAddresses) {
  PluginConfig config;
  auto inputs = step("cloud[1-2]", "1(x2)", "block", 2, 2, 0, {0});
  inputs.node_aliases = "cloud1:10.9.0.1:ip-10-9-0-1,cloud2:fd00::2:ip-fd00-2";
  const auto unresolvable = [](const std::string& host) -> std::string {
    throw Error(dtrain::ErrorKind::kInvalidInput, "cannot resolve host name '" + host + "'");
  };
  const auto plan = plan_step(inputs, config, FrameworkSet{}, unresolvable);
  EXPECT_EQ(plan.node_addresses, (std::vector<std::string>{"10.9.0.1", "fd00::2"}));
  EXPECT_EQ(plan.endpoints.rfind("10.9.0.1:", 0), 0u) << plan.endpoints;
  EXPECT_NE(plan.endpoints.find(",[fd00::2]:"), std::string::npos) << plan.endpoints;
  inputs.node_aliases = "(null)";
  EXPECT_THROW(plan_step(inputs, config, FrameworkSet{}, unresolvable), Error);
  EXPECT_EQ(parse_node_aliases("n1:[fd00::1]:h1").at("n1"), "fd00::1");
  EXPECT_THROW(parse_node_aliases("n1:10.0.0.1"), Error);
  EXPECT_THROW(parse_node_aliases(":10.0.0.1:h"), Error);
}

// Past ip_max_nodes each node resolves only its own name and rank 0's: O(nodes) lookups per step.
TEST(StepPlan, PastIpMaxNodesTheListsCarryNamesAndANodeResolvesItselfAndRankZerosNode) {
  PluginConfig config;
  config.ip_max_nodes = 3;
  std::vector<std::string> looked_up;
  const auto counting = [&](const std::string& host) {
    looked_up.push_back(host);
    return fake_resolve(host);
  };
  const auto plan = plan_step(step("node[1-4]", "2(x4)", "block", 4, 8, 2, {4, 5}), config,
                              FrameworkSet{}, counting);
  EXPECT_EQ(looked_up, (std::vector<std::string>{"node3", "node1"}));
  EXPECT_TRUE(plan.names_past_ip_max_nodes);
  EXPECT_EQ(plan.node_addresses, (std::vector<std::string>{"node1", "node2", "node3", "node4"}));
  EXPECT_EQ(plan.local_address, "10.0.0.3");
  EXPECT_EQ(plan.master_addr, "10.0.0.1");
  const auto port = std::to_string(plan.ports.endpoint_ports[1]);
  EXPECT_NE(plan.endpoints.find(",node3:" + port + ","), std::string::npos) << plan.endpoints;
  ASSERT_EQ(plan.step_warnings.size(), 1u);
  EXPECT_NE(plan.step_warnings[0].find("4 nodes, more than ip_max_nodes=3"), std::string::npos)
      << plan.step_warnings[0];
  const auto env = rank_environment(plan, 5);
  EXPECT_EQ(value_of(env, "MASTER_ADDR"), "10.0.0.1");
  EXPECT_EQ(value_of(env, "PADDLE_MASTER"), "10.0.0.1:" + std::to_string(plan.ports.master));
  EXPECT_EQ(value_of(env, "PADDLE_CURRENT_ENDPOINT"), "node3:" + port);
  EXPECT_EQ(value_of(env, "TF_CONFIG").rfind(R"({"cluster":{"worker":["node1:)", 0), 0u);

  // Rank 0's node resolves one name; the lists do not depend on what any node resolved.
  looked_up.clear();
  const auto elsewhere = [&](const std::string& host) {
    looked_up.push_back(host);
    return "192.168.7." + host.substr(4);
  };
  const auto on_rank_zeros_node = plan_step(step("node[1-4]", "2(x4)", "block", 4, 8, 0, {0, 1}),
                                            config, FrameworkSet{}, elsewhere);
  EXPECT_EQ(looked_up, (std::vector<std::string>{"node1"}));
  EXPECT_EQ(on_rank_zeros_node.local_address, "192.168.7.1");
  EXPECT_EQ(on_rank_zeros_node.endpoints, plan.endpoints);
  EXPECT_EQ(on_rank_zeros_node.endpoints_hash, plan.endpoints_hash);
}

TEST(StepPlan, UpToIpMaxNodesEveryNodeIsResolvedAsBefore) {
  PluginConfig config;
  EXPECT_EQ(config.ip_max_nodes, kDefaultIpMaxNodes);
  std::size_t lookups = 0;
  const auto counting = [&](const std::string& host) {
    ++lookups;
    return "10.0." + std::to_string(std::stoi(host.substr(4)) / 256) + "." +
           std::to_string(std::stoi(host.substr(4)) % 256);
  };
  const auto nodes = [](std::uint32_t count) { return "node[1-" + std::to_string(count) + "]"; };
  const auto at_limit =
      plan_step(step(nodes(kDefaultIpMaxNodes), "1(x" + std::to_string(kDefaultIpMaxNodes) + ")",
                     "block", kDefaultIpMaxNodes, kDefaultIpMaxNodes, 5, {5}),
                config, FrameworkSet{}, counting);
  EXPECT_EQ(lookups, kDefaultIpMaxNodes);
  EXPECT_FALSE(at_limit.names_past_ip_max_nodes);
  EXPECT_EQ(at_limit.local_address, "10.0.0.6");
  EXPECT_EQ(at_limit.node_addresses[5], "10.0.0.6");
  EXPECT_EQ(at_limit.master_addr, "10.0.0.1");
  EXPECT_TRUE(at_limit.step_warnings.empty());
  EXPECT_EQ(at_limit.endpoints.rfind("10.0.0.1:", 0), 0u);

  lookups = 0;
  const std::uint32_t past = kDefaultIpMaxNodes + 1;
  const auto past_limit =
      plan_step(step(nodes(past), "1(x" + std::to_string(past) + ")", "block", past, past, 5, {5}),
                config, FrameworkSet{}, counting);
  EXPECT_EQ(lookups, 2u);
  EXPECT_TRUE(past_limit.names_past_ip_max_nodes);
  EXPECT_EQ(past_limit.endpoints.rfind("node1:", 0), 0u);

  // address=name resolves nothing, whatever the size, and says nothing about it.
  lookups = 0;
  config.address_mode = AddressMode::kName;
  const auto names =
      plan_step(step(nodes(past), "1(x" + std::to_string(past) + ")", "block", past, past, 5, {5}),
                config, FrameworkSet{}, counting);
  EXPECT_EQ(lookups, 0u);
  EXPECT_FALSE(names.names_past_ip_max_nodes);
  EXPECT_EQ(names.local_address, "node6");
  EXPECT_EQ(names.master_addr, "node1");
  EXPECT_TRUE(names.step_warnings.empty());
}

TEST(StepPlan, PastIpMaxNodesSlurmsAliasesAreListedAndCostNoLookup) {
  PluginConfig config;
  config.ip_max_nodes = 1;
  auto inputs = step("cloud[1-3]", "1(x3)", "block", 3, 3, 1, {1});
  inputs.node_aliases = "cloud1:10.9.0.1:ip-10-9-0-1,cloud2:10.9.0.2:ip-10-9-0-2";
  const auto unresolvable = [](const std::string& host) -> std::string {
    throw Error(dtrain::ErrorKind::kInvalidInput, "cannot resolve host name '" + host + "'");
  };
  const auto plan = plan_step(inputs, config, FrameworkSet{}, unresolvable);
  EXPECT_EQ(plan.node_addresses, (std::vector<std::string>{"10.9.0.1", "10.9.0.2", "cloud3"}));
  EXPECT_EQ(plan.local_address, "10.9.0.2");
  EXPECT_EQ(plan.master_addr, "10.9.0.1");
  // The one name left to resolve is this node's own.
  inputs.node_id = 2;
  inputs.local_ranks = std::vector<std::uint32_t>{2};
  EXPECT_THROW(plan_step(inputs, config, FrameworkSet{}, unresolvable), Error);
}

TEST(StepPlan, PastIpMaxNodesTheNamesThisNodeResolvesAreCheckedForLoopback) {
  PluginConfig config;
  config.ip_max_nodes = 2;
  const auto debian_on = [](const std::string& loopback_host) {
    return [loopback_host](const std::string& host) {
      return host == loopback_host ? std::string("127.0.1.1") : "10.0.0." + host.substr(4);
    };
  };
  const auto hosts = [](const std::string& host) { return "127.0.1.1 " + host; };
  const auto on_node3 = step("node[1-3]", "1(x3)", "block", 3, 3, 2, {2});
  for (const char* own_or_master : {"node3", "node1"}) {
    try {
      plan_step(on_node3, config, FrameworkSet{}, debian_on(own_or_master), hosts);
      FAIL() << "a loopback address for " << own_or_master << " was accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string("node ") + own_or_master +
                          " resolves to the loopback address 127.0.1.1 on node3"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find(std::string("'127.0.1.1 ") + own_or_master + "'"), std::string::npos)
          << what;
    }
  }
  // Another node's name is not resolved here, so its hosts line cannot matter.
  EXPECT_NO_THROW(plan_step(on_node3, config, FrameworkSet{}, debian_on("node2"), hosts));
}

TEST(Netio, ListenerUidComesFromTheKernelTable) {
  // /proc/net/tcp: 127.0.0.1:8080 listening (uid 1000), 0.0.0.0:9090 listening (uid 65534), and
  // an established connection from port 7070 (uid 0).
  const std::string tcp =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
      "timeout inode\n"
      "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000  0 1 1\n"
      "   1: 00000000:2382 00000000:0000 0A 00000000:00000000 00:00000000 00000000 65534  0 2 1\n"
      "   2: 0100007F:1B9E 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0  0 3 1\n";
  EXPECT_EQ(listener_uid_in(tcp, "127.0.0.1", 8080), 1000u);
  EXPECT_EQ(listener_uid_in(tcp, "127.0.0.2", 8080), std::nullopt);  // another address
  EXPECT_EQ(listener_uid_in(tcp, "10.1.2.3", 9090), 65534u);         // the wildcard holds it
  EXPECT_EQ(listener_uid_in(tcp, "127.0.0.1", 7070), std::nullopt);  // not listening
  const std::string tcp6 =
      "  sl  local_address                         remote_address                        st "
      "tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 00000000000000000000000000000000:1F91 00000000000000000000000000000000:0000 0A "
      "00000000:00000000 00:00000000 00000000   42        0 4 1\n";
  EXPECT_EQ(listener_uid_in(tcp6, "10.1.2.3", 8081), 42u);  // [::] takes IPv4 too
  EXPECT_EQ(listener_uid_in(tcp6, "fd00::1", 8081), 42u);
  EXPECT_EQ(listener_uid_in(tcp6, "node1", 8081), std::nullopt);
}

TEST(Netio, HostsLineFindsTheNameAsAWord) {
  const auto file =
      std::filesystem::temp_directory_path() / ("dtrain-hosts-" + std::to_string(getpid()));
  std::ofstream(file) << "# 127.0.0.1 node1\n127.0.0.1\tlocalhost\n127.0.1.1  node10 node1  # me\n";
  EXPECT_EQ(hosts_line("node1", file.string()), "127.0.1.1  node10 node1");
  EXPECT_EQ(hosts_line("node2", file.string()), "");
  EXPECT_EQ(hosts_line("node1", "/nonexistent/hosts"), "");
  std::filesystem::remove(file);
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

TEST(StepPlan, JaxGetsTheCoordinatorOnRankZerosNodeAtTheMasterPort) {
  PluginConfig config;
  config.address_mode = AddressMode::kName;
  const auto plan = plan_step(step("node[1-4]", "4,2,1(x2)", "block", 4, 8, 1, {4, 5}), config,
                              parse_frameworks("jax"), fake_resolve);
  const auto env = rank_environment(plan, 5);
  EXPECT_EQ(value_of(env, "JAX_COORDINATOR_ADDRESS"), "node1:" + std::to_string(plan.ports.master));
  EXPECT_EQ(value_of(env, "MASTER_PORT"), "<unset>");
  const auto torch = plan_step(step("node[1-4]", "4,2,1(x2)", "block", 4, 8, 1, {4, 5}), config,
                               parse_frameworks("torch"), fake_resolve);
  EXPECT_EQ(value_of(rank_environment(torch, 5), "JAX_COORDINATOR_ADDRESS"), "<unset>");
}

// torchrun started once per node reads PET_*; a step with several tasks on a node gets none,
// since each torchrun there would claim the same node rank.
TEST(StepPlan, OneTaskPerNodeStepsGetTorchrunsDefaults) {
  PluginConfig config;
  config.address_mode = AddressMode::kName;
  const auto per_node = plan_step(step("node[1-3]", "1(x3)", "block", 3, 3, 2, {2}), config,
                                  parse_frameworks("torch"), fake_resolve);
  const auto env = rank_environment(per_node, 2);
  EXPECT_EQ(value_of(env, "PET_NNODES"), "3");
  EXPECT_EQ(value_of(env, "PET_NODE_RANK"), "2");
  EXPECT_EQ(value_of(env, "PET_MASTER_ADDR"), "node1");
  EXPECT_EQ(value_of(env, "PET_MASTER_PORT"), std::to_string(per_node.ports.master));
  // Without GPUs torchrun keeps its own --nproc-per-node default.
  EXPECT_EQ(value_of(node_environment(per_node, 2, {}).tasks[0], "PET_NPROC_PER_NODE"), "<unset>");
  NodeBindingEnv four_gpus;
  four_gpus.tasks = {{{{"CUDA_VISIBLE_DEVICES", "0,1,2,3", true}}, 4, {0, 1, 2, 3}}};
  EXPECT_EQ(value_of(node_environment(per_node, 2, four_gpus).tasks[0], "PET_NPROC_PER_NODE"), "4");
  const auto several = plan_step(step("node[1-4]", "4,2,1(x2)", "block", 4, 8, 1, {4, 5}), config,
                                 parse_frameworks("torch"), fake_resolve);
  EXPECT_EQ(value_of(rank_environment(several, 5), "PET_NODE_RANK"), "<unset>");
  const auto paddle = plan_step(step("node[1-3]", "1(x3)", "block", 3, 3, 2, {2}), config,
                                parse_frameworks("paddle"), fake_resolve);
  EXPECT_EQ(value_of(rank_environment(paddle, 2), "PET_NNODES"), "<unset>");
}

TEST(NodeEnvironment, DeviceVariablesPointAtTheTasksOwnGpuInItsView) {
  PluginConfig config;
  config.address_mode = AddressMode::kName;
  const auto plan = plan_step(step("node[1-4]", "4,2,1(x2)", "block", 4, 8, 1, {4, 5}), config,
                              FrameworkSet{}, nullptr);
  // The node view of two one-GPU tasks: both see "2,3", each uses its own position.
  NodeBindingEnv binding;
  binding.tasks = {{{{"CUDA_VISIBLE_DEVICES", "2,3", true}}, 1, {0}},
                   {{{"CUDA_VISIBLE_DEVICES", "2,3", true}}, 1, {1}}};
  const auto env = node_environment(plan, 1, binding);
  EXPECT_EQ(value_of(env.tasks[1], "FLAGS_selected_gpus"), "1");
  EXPECT_EQ(value_of(env.tasks[1], "JAX_LOCAL_DEVICE_IDS"), "1");
  EXPECT_EQ(value_of(env.tasks[0], "JAX_LOCAL_DEVICE_IDS"), "0");
  // GPUs named by UUID: nothing points into a list the plugin cannot read.
  binding.gpus_left_as_named = true;
  EXPECT_EQ(value_of(node_environment(plan, 1, binding).tasks[1], "JAX_LOCAL_DEVICE_IDS"),
            "<unset>");
}

// TF_CONFIG's worker list is assembled from pieces for speed; it must be exactly what the JSON
// library writes for the endpoint list, escapes included.
TEST(StepPlan, TfClusterIsTheJsonLibrarysListOfTheEndpoints) {
  PluginConfig config;
  auto inputs = step("cloud[1-4]", "3,1(x3)", "cyclic", 4, 6, 0, {0, 4, 5});
  inputs.node_aliases =
      "cloud1:fd00::1:h1,cloud2:10.0.0.\"2:h2,cloud3:10.0.0.\\3:h3,cloud4:10.0.0.\t4:h4";
  const auto plan = plan_step(inputs, config, FrameworkSet{}, fake_resolve);
  nlohmann::json workers = nlohmann::json::array();
  for (std::uint32_t r = 0; r < plan.layout.world_size(); ++r)
    workers.push_back(endpoint_of(plan, r));
  EXPECT_EQ(plan.tf_cluster, nlohmann::json({{"worker", workers}}).dump());
  EXPECT_NE(plan.tf_cluster.find(R"("10.0.0.\"2:)"), std::string::npos) << plan.tf_cluster;
  EXPECT_EQ(nlohmann::json::parse(value_of(rank_environment(plan, 2), "TF_CONFIG")),
            nlohmann::json({{"cluster", {{"worker", workers}}},
                            {"task", {{"type", "worker"}, {"index", 2}}}}));
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

TEST(MemoryFiles, OnlyOversizedValuesMoveAndTheTaskReadsThemBack) {
  // 1000 ranks with 200-character host names: the endpoint list is about 207 KB. Node 0 runs
  // ranks 0 and 1.
  PluginConfig config;
  config.address_mode = AddressMode::kName;
  const std::string name(200, 'n');
  auto inputs = step(name + "[1-2]", "2,998", "block", 2, 1000, 0, {0, 1});
  inputs.reserved_ports = "40000-40998";  // derived ports stop at port_block - 1 tasks per node
  const auto plan = plan_step(inputs, config, FrameworkSet{}, nullptr);
  const auto env = node_environment(plan, 0, {});
  ASSERT_EQ(env.tasks.size(), 2u);
  const auto var_of = [&](std::size_t task, const std::string& var_name) -> const EnvVar& {
    for (const auto& var : env.tasks[task]) {
      if (var.name == var_name) return var;
    }
    throw std::runtime_error(var_name + " not exported");
  };
  EXPECT_EQ(value_of(env.tasks[0], "DTRAIN_RANK"), "0");
  EXPECT_FALSE(var_of(0, "DTRAIN_RANK").value_in_memory_file);
  EXPECT_EQ(value_of(env.tasks[1], "DTRAIN_ENDPOINTS"), "<unset>");
  for (const char* moved :
       {"DTRAIN_ENDPOINTS_FILE", "PADDLE_TRAINER_ENDPOINTS_FILE", "TF_CONFIG_FILE"}) {
    EXPECT_TRUE(var_of(1, moved).value_in_memory_file) << moved;
  }
  // TF_CONFIG names the task's own index.
  const std::string& tf_config = var_of(1, "TF_CONFIG_FILE").value;
  EXPECT_EQ(tf_config, value_of(rank_environment(plan, 1), "TF_CONFIG"));
  EXPECT_NE(tf_config.find(R"("task":{"type":"worker","index":1})"), std::string::npos);
  EXPECT_NE(env.spill_warning.find("DTRAIN_ENDPOINTS, PADDLE_TRAINER_ENDPOINTS, TF_CONFIG"),
            std::string::npos)
      << env.spill_warning;
  // A task built alone gets exactly its entry of the node's environment.
  for (std::uint32_t local = 0; local < 2; ++local) {
    EXPECT_EQ(task_environment(plan, 0, local, {}).vars, env.tasks[local]) << local;
  }
  EXPECT_THROW(task_environment(plan, 0, 2, {}), Error);
  EXPECT_THROW(task_environment(plan, 2, 0, {}), Error);

  // Each file's value has its hash beside it; the endpoint list's is DTRAIN_ENDPOINTS_HASH.
  EXPECT_EQ(value_of(env.tasks[1], "TF_CONFIG_HASH"), value_hash(tf_config));
  EXPECT_EQ(value_of(env.tasks[1], "PADDLE_TRAINER_ENDPOINTS_HASH"), plan.endpoints_hash);
  EXPECT_EQ(value_of(env.tasks[1], "DTRAIN_ENDPOINTS_HASH"), plan.endpoints_hash);
  std::size_t endpoint_hashes = 0;
  for (const auto& var : env.tasks[1]) endpoint_hashes += var.name == "DTRAIN_ENDPOINTS_HASH";
  EXPECT_EQ(endpoint_hashes, 1u);
  // The task drops the inherited plain forms of what went to files, and every stale file form.
  const auto removed = task_environment(plan, 0, 1, {}).remove;
  EXPECT_EQ(removed, (std::vector<std::string>{"DTRAIN_ENDPOINTS", "PADDLE_TRAINER_ENDPOINTS",
                                               "TF_CONFIG"}));
  const auto small = plan_step(step(name + "[1-2]", "1(x2)", "block", 2, 2, 0, {0}), config,
                               FrameworkSet{}, nullptr);
  EXPECT_EQ(task_environment(small, 0, 0, {}).remove,
            (std::vector<std::string>{"DTRAIN_ENDPOINTS_FILE", "PADDLE_TRAINER_ENDPOINTS_FILE",
                                      "PADDLE_TRAINER_ENDPOINTS_HASH", "TF_CONFIG_FILE",
                                      "TF_CONFIG_HASH"}));

  // The memory file: read back through its path, sealed against writes, open across exec.
  const int fd = create_memory_file("dtrain:1234.1:rank1:TF_CONFIG", tf_config);
  const std::string path = memory_file_path(fd);
  EXPECT_EQ(path, "/proc/self/fd/" + std::to_string(fd));
  EXPECT_GE(fd, 10);
  EXPECT_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  std::ifstream in(path);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, tf_config);
  // Sealed: no one rewrites a task's TF_CONFIG.
  const int writer = open(path.c_str(), O_WRONLY);
  ASSERT_GE(writer, 0);
  EXPECT_LT(write(writer, "x", 1), 0);
  EXPECT_EQ(errno, EPERM);
  close(writer);
  close(fd);
}

TEST(NodeEnvironment, EqualValuesOfOneTaskShareAMemoryFile) {
  const std::string endpoints(200000, 'e');
  const std::string other(200000, 'o');
  const std::vector<EnvVar> vars = {{"DTRAIN_ENDPOINTS_FILE", endpoints, false, true},
                                    {"DTRAIN_RANK", "3"},
                                    {"PADDLE_TRAINER_ENDPOINTS_FILE", endpoints, false, true},
                                    {"TF_CONFIG_FILE", other, false, true}};
  const auto paths = export_memory_files({77, 3, 5}, vars);
  ASSERT_EQ(paths.size(), 4u);
  EXPECT_EQ(paths[1], "");
  EXPECT_EQ(paths[2], paths[0]);
  EXPECT_NE(paths[3], paths[0]);
  std::ifstream in(paths[3]);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()),
            other);
  // The shared file's label names both values; each label names the task.
  const auto label_of = [](const std::string& path) {
    char target[256] = {};
    EXPECT_GT(readlink(path.c_str(), target, sizeof target - 1), 0);
    return std::string(target);
  };
  EXPECT_EQ(label_of(paths[0]),
            "/memfd:dtrain:77.3:rank5:DTRAIN_ENDPOINTS,PADDLE_TRAINER_ENDPOINTS (deleted)");
  EXPECT_EQ(label_of(paths[3]), "/memfd:dtrain:77.3:rank5:TF_CONFIG (deleted)");
  for (const auto& path : {paths[0], paths[3]}) close(*memory_file_descriptor(path));
}

TEST(NodeEnvironment, MergesTheBindingAndAddsPaddleDeviceRules) {
  PluginConfig config;
  config.address_mode = AddressMode::kName;
  const auto plan = plan_step(step("node[1-4]", "4,2,1(x2)", "block", 4, 8, 1, {4, 5}), config,
                              FrameworkSet{}, nullptr);
  NodeBindingEnv binding;
  binding.tasks = {{{{"CUDA_VISIBLE_DEVICES", "0,1", true}}, 2, {0, 1}},
                   {{{"OMP_NUM_THREADS", "4", true}}, 0, {}}};
  const auto env = node_environment(plan, 1, binding);
  ASSERT_EQ(env.tasks.size(), 2u);
  EXPECT_EQ(value_of(env.tasks[0], "DTRAIN_RANK"), "4");
  EXPECT_EQ(value_of(env.tasks[0], "CUDA_VISIBLE_DEVICES"), "0,1");
  EXPECT_EQ(value_of(env.tasks[0], "FLAGS_selected_gpus"), "0,1");
  EXPECT_EQ(value_of(env.tasks[0], "PADDLE_DISTRI_BACKEND"), "<unset>");
  EXPECT_EQ(value_of(env.tasks[1], "OMP_NUM_THREADS"), "4");
  EXPECT_EQ(value_of(env.tasks[1], "PADDLE_DISTRI_BACKEND"), "gloo");
  EXPECT_TRUE(env.spill_warning.empty());
  // Unbound: a GPU is assumed only where CUDA_VISIBLE_DEVICES was set.
  const auto unbound = node_environment(plan, 1, NodeBindingEnv{{}, true});
  EXPECT_EQ(value_of(unbound.tasks[0], "PADDLE_DISTRI_BACKEND"), "<unset>");
  EXPECT_EQ(value_of(unbound.tasks[0], "FLAGS_selected_gpus"), "<unset>");
  const auto torch_only = plan_step(step("node[1-4]", "4,2,1(x2)", "block", 4, 8, 1, {4, 5}),
                                    config, parse_frameworks("torch"), nullptr);
  EXPECT_EQ(value_of(node_environment(torch_only, 1, {}).tasks[1], "PADDLE_DISTRI_BACKEND"),
            "<unset>");
  EXPECT_THROW(node_environment(plan, 4, {}), Error);
}

TEST(MemoryFiles, LimitMatchesExecve) {
  EXPECT_FALSE(exceeds_exec_limit({"A", std::string(kMaxEnvStringBytes - 3, 'x')}));
  EXPECT_TRUE(exceeds_exec_limit({"A", std::string(kMaxEnvStringBytes - 2, 'x')}));
}
