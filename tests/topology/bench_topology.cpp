// SPDX-License-Identifier: Apache-2.0
// Load + plan time for one node, as the SPANK plugin does once per node per step: from the hwloc
// XML (topology=/path.xml, or slurmd's cached XML) or from slurmd's cached summary
// (summary_and_plan: reading the file's text is left out, the page cache serves it).
// Target: < 20 ms per node for the 8-GPU DGX XML. guard_only is the part of the load spent
// in find_xml_hazard, the scan that keeps hwloc 2.9 from crashing on malformed XML.

#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "topology/binding.hpp"
#include "topology/load_io.hpp"
#include "topology/summary.hpp"
#include "topology/xml_guard.hpp"

namespace {

using dtrain::topology::BindingRequest;

void load_and_plan(benchmark::State& state, const std::string& path, unsigned tasks) {
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("topology not found: " + path).c_str());
    return;
  }
  BindingRequest request;
  request.local_tasks = tasks;
  std::size_t gpus = 0;
  for (auto _ : state) {
    const auto topology = dtrain::topology::load_topology(path);
    const auto plan = dtrain::topology::plan_binding(topology, request);
    gpus = topology.gpus.size();
    benchmark::DoNotOptimize(plan.tasks.data());
  }
  state.counters["gpus"] = static_cast<double>(gpus);
  state.counters["tasks"] = tasks;
}

void summary_and_plan(benchmark::State& state, const std::string& path, unsigned tasks) {
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("topology not found: " + path).c_str());
    return;
  }
  const std::string summary = dtrain::topology::to_summary(dtrain::topology::load_topology(path));
  BindingRequest request;
  request.local_tasks = tasks;
  for (auto _ : state) {
    const auto topology = dtrain::topology::from_summary(summary, path);
    const auto plan = dtrain::topology::plan_binding(topology, request);
    benchmark::DoNotOptimize(plan.tasks.data());
  }
  state.counters["summary_bytes"] = static_cast<double>(summary.size());
}

void plan_only(benchmark::State& state, const std::string& path, unsigned tasks) {
  const auto topology = dtrain::topology::load_topology(path);
  BindingRequest request;
  request.local_tasks = tasks;
  for (auto _ : state) {
    const auto plan = dtrain::topology::plan_binding(topology, request);
    benchmark::DoNotOptimize(plan.tasks.data());
  }
}

void guard_only(benchmark::State& state, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string xml{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (xml.empty()) {
    state.SkipWithError(("topology not found: " + path).c_str());
    return;
  }
  for (auto _ : state) {
    const auto hazard = dtrain::topology::find_xml_hazard(xml);
    if (hazard) state.SkipWithError(hazard->reason.c_str());
    benchmark::DoNotOptimize(hazard);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * xml.size()));
}

const std::string kDgx = std::string(DTRAIN_TOPOLOGY_FIXTURES) + "/dgx-h100.xml";
const std::string kP5en = std::string(DTRAIN_SHARED_TOPOLOGIES) + "/aws-ofi-nccl_p5en_topology.xml";

}  // namespace

BENCHMARK_CAPTURE(load_and_plan, dgx_h100_8_tasks, kDgx, 8)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(load_and_plan, p5en_8_tasks, kP5en, 8)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(summary_and_plan, dgx_h100_8_tasks, kDgx, 8)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(summary_and_plan, p5en_8_tasks, kP5en, 8)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(guard_only, dgx_h100, kDgx)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(guard_only, p5en, kP5en)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(plan_only, dgx_h100_8_tasks, kDgx, 8)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
