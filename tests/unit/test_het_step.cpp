// SPDX-License-Identifier: Apache-2.0
// Heterogeneous steps as Slurm hands them to each node: components whose nodes do not sort in
// component order, components left out by --het-group, and layout requests that fail.
#include <gtest/gtest.h>

#include <map>

#include "core/error.hpp"
#include "core/het_step.hpp"
#include "core/step_plan.hpp"

using dtrain::Error;
using namespace dtrain::core;

namespace {

ComponentAnswer component(std::uint32_t job, std::vector<std::string> hosts,
                          std::vector<std::vector<std::uint32_t>> task_ids) {
  ComponentAnswer answer;
  answer.job_id = job;
  auto& layout = answer.layout.emplace();
  layout.hosts = std::move(hosts);
  for (const auto& ids : task_ids) layout.task_count += static_cast<std::uint32_t>(ids.size());
  layout.task_ids = std::move(task_ids);
  return answer;
}

ComponentAnswer not_in_step(std::uint32_t job) {
  ComponentAnswer answer;
  answer.job_id = job;
  answer.not_in_step = true;
  return answer;
}

std::string resolve(const std::string& host) {
  static const std::map<std::string, std::string> addresses = {{"gpu1", "10.1.0.1"},
                                                               {"gpu2", "10.1.0.2"},
                                                               {"cpu1", "10.2.0.1"},
                                                               {"cpu2", "10.2.0.2"},
                                                               {"mem1", "10.3.0.1"}};
  return addresses.at(host);
}

// What plan_step gets on the node that runs `local_ranks` of the het world, as
// slurmstepd_user.cpp builds it: the world's lists, this component's node id shifted.
StepInputs het_inputs(const HetWorld& world, std::uint32_t component_node_id,
                      std::vector<std::uint32_t> component_task_ids) {
  StepInputs in;
  in.job_id = world.leader_job_id;
  in.step_id = 0;
  in.spec.nodelist = world.nodelist;
  in.spec.tasks_per_node = world.tasks_per_node;
  in.spec.distribution = {DistributionKind::kArbitrary, 0};
  in.spec.arbitrary_hosts = world.hosts_of_ranks;
  in.spec.nnodes = world.node_count;
  in.spec.ntasks = world.task_count;
  in.node_id = component_node_id + world.node_offset;
  for (auto& id : component_task_ids) id += world.rank_offset;
  in.local_ranks = component_task_ids;
  return in;
}

}  // namespace

// srun -p gpu -N2 -n4 ... : -p cpu -N1 -n1 ...: Slurm sorts the step's node list (cpu1 before
// gpu1), while SLURM_PROCID and SLURM_NODEID count in component order. Before, every node failed
// with "layout mismatch on cpu1".
TEST(HetStep, ComponentsAgainstNodeOrderFormOneWorldOnEveryNode) {
  const std::vector<ComponentAnswer> answers = {component(500, {"gpu1", "gpu2"}, {{0, 1}, {2, 3}}),
                                                component(501, {"cpu1"}, {{0}})};
  const std::string env_nodes = "cpu1,gpu[1-2]";
  const std::string env_tasks = "1,2(x2)";
  const auto gpu_side = combine_het_components(answers, 500, env_nodes, env_tasks);
  const auto cpu_side = combine_het_components(answers, 501, env_nodes, env_tasks);
  EXPECT_EQ(gpu_side.nodelist, "gpu1,gpu2,cpu1");
  EXPECT_EQ(gpu_side.tasks_per_node, "2,2,1");
  EXPECT_EQ(gpu_side.hosts_of_ranks, "gpu1,gpu1,gpu2,gpu2,cpu1");
  EXPECT_EQ(cpu_side.rank_offset, 4u);
  EXPECT_EQ(cpu_side.node_offset, 2u);
  EXPECT_EQ(gpu_side.leader_job_id, 500u);
  EXPECT_EQ(cpu_side.leader_job_id, 500u);

  PluginConfig config;
  const FrameworkSet all;
  const auto on_gpu2 = plan_step(het_inputs(gpu_side, 1, {2, 3}), config, all, resolve);
  const auto on_cpu1 = plan_step(het_inputs(cpu_side, 0, {0}), config, all, resolve);
  EXPECT_EQ(on_gpu2.endpoints, on_cpu1.endpoints);
  EXPECT_EQ(on_cpu1.node, 2u);  // SLURM_NODEID of cpu1: the gpu component's 2 nodes come first
  EXPECT_EQ(endpoint_of(on_cpu1, 4).rfind("10.2.0.1:", 0), 0u);
  EXPECT_EQ(endpoint_of(on_cpu1, 0).rfind("10.1.0.1:", 0), 0u);
  EXPECT_EQ(on_cpu1.master_addr, "10.1.0.1");
}

// Three components, the middle one laid out cyclic over two nodes, none in sorted order.
TEST(HetStep, ThreeComponentsWithACyclicOneKeepEachComponentsLayout) {
  const std::vector<ComponentAnswer> answers = {component(700, {"mem1"}, {{0}}),
                                                component(701, {"gpu2", "gpu1"}, {{0, 2}, {1}}),
                                                component(702, {"cpu1"}, {{0, 1}})};
  const auto world = combine_het_components(answers, 701, "cpu1,gpu[1-2],mem1", "2,1,2,1");
  EXPECT_EQ(world.hosts_of_ranks, "mem1,gpu2,gpu1,gpu2,cpu1,cpu1");
  EXPECT_EQ(world.nodelist, "mem1,gpu2,gpu1,cpu1");
  EXPECT_EQ(world.tasks_per_node, "1,2,1,2");
  PluginConfig config;
  const auto on_gpu2 = plan_step(het_inputs(world, 0, {0, 2}), config, FrameworkSet{}, resolve);
  const auto on_gpu1 = plan_step(het_inputs(world, 1, {1}), config, FrameworkSet{}, resolve);
  EXPECT_EQ(on_gpu1.endpoints, on_gpu2.endpoints);
  EXPECT_EQ(on_gpu2.layout.local_world_size(on_gpu2.node), 2u);
}

// srun --het-group=1,2: component 0 runs no such step and is left out; ranks start at
// component 1, as SLURM_PROCID does.
TEST(HetStep, AComponentLeftOutByHetGroupIsNotInTheWorld) {
  const std::vector<ComponentAnswer> answers = {not_in_step(900),
                                                component(901, {"gpu1"}, {{0, 1}}),
                                                component(902, {"cpu1", "cpu2"}, {{0}, {1}})};
  const auto world = combine_het_components(answers, 902, "cpu[1-2],gpu1", "1(x2),2");
  EXPECT_EQ(world.task_count, 4u);
  EXPECT_EQ(world.rank_offset, 2u);
  EXPECT_EQ(world.node_offset, 1u);
  EXPECT_EQ(world.left_out, std::vector<std::uint32_t>{0});
  EXPECT_EQ(world.leader_job_id, 900u);  // ports still derive from component 0's job id
}

// Any other failure of a component's layout request (a timeout, a slurmctld failover) must stop
// the step: leaving the component out would give a smaller world whose own checks pass.
TEST(HetStep, AFailedLayoutRequestStopsTheStepInsteadOfShrinkingIt) {
  ComponentAnswer failed;
  failed.job_id = 901;
  failed.error = "Socket timed out on send/recv operation";
  const std::vector<ComponentAnswer> answers = {component(900, {"gpu1"}, {{0, 1}}), failed};
  try {
    combine_het_components(answers, 900, "cpu1,gpu1", "1,2");
    FAIL() << "a failed layout request was taken as an absent component";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("component 1 (job 901)"), std::string::npos) << what;
    EXPECT_NE(what.find("Socket timed out"), std::string::npos) << what;
    EXPECT_NE(what.find("The step stops"), std::string::npos) << what;
  }
}

// Even an answer of "no such step" cannot shrink the world below what the step's environment
// says Slurm launched.
TEST(HetStep, AComponentMissingFromTheWorldButInTheStepIsCaught) {
  const std::vector<ComponentAnswer> answers = {component(900, {"gpu1"}, {{0, 1}}),
                                                not_in_step(901)};
  try {
    combine_het_components(answers, 900, "cpu1,gpu1", "1,2");
    FAIL() << "the world lost cpu1's rank";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no component holds cpu1"), std::string::npos) << what;
    EXPECT_NE(what.find("1 nodes and 2 tasks, but this step runs 2 nodes and 3 tasks"),
              std::string::npos)
        << what;
  }
  EXPECT_THROW(combine_het_components({component(900, {"gpu1"}, {{0, 1}})}, 900, "gpu1", "3"),
               Error);
}

TEST(HetStep, ThisNodesOwnComponentMustAnswer) {
  ComponentAnswer own;
  own.job_id = 900;
  own.not_in_step = true;
  EXPECT_THROW(combine_het_components({own, component(901, {"cpu1"}, {{0}})}, 900, "cpu1", "1"),
               Error);
  EXPECT_THROW(combine_het_components({component(901, {"cpu1"}, {{0}})}, 900, "cpu1", "1"), Error);
  EXPECT_THROW(combine_het_components({}, 900, "cpu1", "1"), Error);
}

TEST(HetStep, ComponentsSharingANodeAreRefusedByName) {
  const std::vector<ComponentAnswer> answers = {component(900, {"node1"}, {{0}}),
                                                component(901, {"node1"}, {{0}})};
  try {
    combine_het_components(answers, 900, "node1", "2");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node1 runs tasks of two components"), std::string::npos);
  }
}

TEST(HetStep, AnInconsistentComponentLayoutIsRefused) {
  auto twice = component(900, {"gpu1", "gpu2"}, {{0, 1}, {1}});
  EXPECT_THROW(combine_het_components({twice}, 900, "gpu[1-2]", "2,1"), Error);
  auto outside = component(900, {"gpu1"}, {{0, 5}});
  EXPECT_THROW(combine_het_components({outside}, 900, "gpu1", "2"), Error);
}
