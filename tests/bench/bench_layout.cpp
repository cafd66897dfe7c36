// SPDX-License-Identifier: Apache-2.0
// Hot paths of the core: the whole-step layout, and the plugin's per-node work for a step
// (layout, endpoints, ports, every local task's environment), driven offline.
#include <benchmark/benchmark.h>

#include "core/config.hpp"
#include "core/hostlist.hpp"
#include "core/layout.hpp"
#include "core/step_plan.hpp"

namespace {

dtrain::core::StepSpec spec_for(std::int64_t nodes, const char* dist) {
  dtrain::core::StepSpec spec;
  spec.nodelist = "node[00001-" + std::to_string(100000 + nodes).substr(1) + "]";
  spec.tasks_per_node = "8(x" + std::to_string(nodes) + ")";
  spec.distribution = dtrain::core::parse_distribution(dist);
  spec.nnodes = static_cast<std::uint32_t>(nodes);
  spec.ntasks = static_cast<std::uint32_t>(nodes * 8);
  return spec;
}

void BM_LayoutBlock(benchmark::State& state) {
  const auto spec = spec_for(state.range(0), "block");
  for (auto _ : state) benchmark::DoNotOptimize(dtrain::core::derive_layout(spec));
  state.SetItemsProcessed(state.iterations() * state.range(0) * 8);
  state.counters["ranks"] = static_cast<double>(state.range(0) * 8);
}
BENCHMARK(BM_LayoutBlock)->Arg(1)->Arg(64)->Arg(1024)->Arg(8192)->Unit(benchmark::kMicrosecond);

void BM_LayoutCyclic(benchmark::State& state) {
  const auto spec = spec_for(state.range(0), "cyclic");
  for (auto _ : state) benchmark::DoNotOptimize(dtrain::core::derive_layout(spec));
  state.SetItemsProcessed(state.iterations() * state.range(0) * 8);
}
BENCHMARK(BM_LayoutCyclic)->Arg(1)->Arg(64)->Arg(1024)->Arg(8192)->Unit(benchmark::kMicrosecond);

void BM_HostlistExpand(benchmark::State& state) {
  const auto spec = spec_for(state.range(0), "block");
  for (auto _ : state) {
    benchmark::DoNotOptimize(dtrain::core::expand_hostlist(spec.nodelist, spec.nnodes));
  }
}
BENCHMARK(BM_HostlistExpand)->Arg(8192)->Unit(benchmark::kMicrosecond);

// What user_init does on one node of an N-node, 8-task-per-node step, minus name resolution
// (address=name) and the port probe: the figure quoted as "plugin CPU time per node".
void BM_PluginNodePlan(benchmark::State& state) {
  dtrain::core::StepInputs in;
  in.job_id = 4242;
  in.step_id = 0;
  in.node_id = 0;
  in.spec = spec_for(state.range(0), "block");
  in.local_ranks = {0, 1, 2, 3, 4, 5, 6, 7};
  dtrain::core::PluginConfig config;
  config.address_mode = dtrain::core::AddressMode::kName;
  const dtrain::core::FrameworkSet all;
  for (auto _ : state) {
    const auto plan = dtrain::core::plan_step(in, config, all, nullptr);
    for (std::uint32_t rank = 0; rank < 8; ++rank) {
      benchmark::DoNotOptimize(dtrain::core::rank_environment(plan, rank));
    }
  }
}
BENCHMARK(BM_PluginNodePlan)->Arg(4)->Arg(1024)->Arg(8192)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
