// SPDX-License-Identifier: Apache-2.0
// Planning inside a step's cpuset on a shared node.

#include <gtest/gtest.h>

#include <set>

#include "topology/allowed_cpus.hpp"
#include "topology/binding.hpp"
#include "topology/load_io.hpp"
#include "topology/node_binding.hpp"
#include "topology_test_support.hpp"

namespace dtrain::topology {
namespace {

using testing::fixture;

std::string value_of(const core::TaskBindingEnv& task, const std::string& name) {
  for (const auto& var : task.env) {
    if (var.name == name) return var.value;
  }
  return "(unset)";
}

TEST(AllowedCpus, RestrictionKeepsOnlyTheStepsCoresDomainsAndLocalities) {
  const NodeTopology dgx = load_topology(fixture("dgx-h100.xml"));
  // A job holding cores 28-41 (with their hyperthreads 140-153) of NUMA node 0.
  const CpuList allowed = parse_cpu_list("28-41,140-153", "test");
  const NodeTopology cut = restrict_to_cpus(dgx, allowed);
  EXPECT_EQ(cut.cores.size(), 14u);
  EXPECT_EQ(format_cpu_list(cut.numa_nodes[0].cpus), "28-41,140-153");
  EXPECT_TRUE(cut.numa_nodes[1].cpus.empty());
  EXPECT_EQ(format_cpu_list(cut.gpus[0].placement.locality.cpus), "28-41,140-153");
  EXPECT_TRUE(cut.gpus[7].placement.locality.cpus.empty());
  // CPUs the topology does not have: unchanged (a site XML of another machine).
  EXPECT_EQ(restrict_to_cpus(dgx, parse_cpu_list("500-501", "test")).cores.size(),
            dgx.cores.size());
}

// Two jobs share a DGX: each holds 14 cores. Four tasks of one job get disjoint shares of its
// cores, none outside them, and OMP_NUM_THREADS counts exactly the cores of the share.
TEST(AllowedCpus, TasksOfAConfinedStepSplitItsCpusetWithoutOverlap) {
  const NodeTopology dgx = load_topology(fixture("dgx-h100.xml"));
  for (const char* cpuset : {"28-41,140-153", "0-6,112-118,56-62,168-174"}) {
    SCOPED_TRACE(cpuset);
    const CpuList allowed = parse_cpu_list(cpuset, "test");
    StepGpuVariables gpus;
    gpus.step_gpus = "0,4";
    const NodeBinding b = bind_node(dgx, 4, gpus, allowed);
    ASSERT_EQ(b.cpus.size(), 4u);
    std::set<unsigned> seen;
    for (std::size_t t = 0; t < 4; ++t) {
      ASSERT_FALSE(b.cpus[t].empty()) << t;
      for (unsigned cpu : b.cpus[t]) {
        EXPECT_TRUE(std::binary_search(allowed.begin(), allowed.end(), cpu)) << cpu;
        EXPECT_TRUE(seen.insert(cpu).second) << "CPU " << cpu << " given twice";
      }
      std::set<unsigned> cores;
      for (unsigned cpu : b.cpus[t]) cores.insert(cpu >= 112 ? cpu - 112 : cpu);
      EXPECT_EQ(value_of(b.env.tasks[t], "OMP_NUM_THREADS"), std::to_string(cores.size()));
      EXPECT_EQ(value_of(b.env.tasks[t], "DTRAIN_CPU_LIST"), format_cpu_list(b.cpus[t]));
    }
  }
}

}  // namespace
}  // namespace dtrain::topology
