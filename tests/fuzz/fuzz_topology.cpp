// SPDX-License-Identifier: Apache-2.0
// Fuzzes the hwloc adapter and the binding policy: the input is a hwloc XML file, loaded by
// the real topology::load_topology (as the plugin does for topology=/path.xml), then planned
// for several task counts and rendered as dtrain-plan prints it.
//
// The XML lives in a memfd reached through /proc/self/fd, so each execution reuses one
// in-memory file and load_io.cpp runs unchanged. hwloc's XML reader is chosen as in production:
// libxml2 when libhwloc-plugins is installed; HWLOC_LIBXML_IMPORT=0 selects hwloc's own.
//
// hwloc 2.9 itself aborts or dereferences NULL on some XML; load_topology refuses those
// inputs first (topology/xml_guard.hpp), so a crash inside hwloc here is a gap in that guard.

#include <hwloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "fuzz_support.hpp"
#include "topology/binding.hpp"
#include "topology/environment.hpp"
#include "topology/load_io.hpp"
#include "topology/render.hpp"

namespace {

using dtrain::fuzz::require;
using dtrain::topology::BindingPlan;
using dtrain::topology::BindingRequest;
using dtrain::topology::NodeTopology;

std::string xml_path;  // "/proc/self/fd/N" of the memfd
int xml_fd = -1;

void write_input(const std::uint8_t* data, std::size_t size) {
  if (ftruncate(xml_fd, 0) != 0) std::abort();
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = pwrite(xml_fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<std::size_t>(n);
  }
}

void check_plan(const NodeTopology& topology, const BindingRequest& request,
                const BindingPlan& plan) {
  require(plan.tasks.size() == request.local_tasks, "one binding per local task");
  for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
    const auto& task = plan.tasks[i];
    require(task.local_rank == i, "bindings out of local-rank order");
    require(task.gpu_bus_ids.empty() == task.cuda_visible_devices.empty(),
            "CUDA_VISIBLE_DEVICES without GPUs or GPUs without it");
    require(task.gpu_bus_ids.size() <= topology.gpus.size(), "more GPUs than the node has");
    require(task.nics.size() <= topology.nics.size(), "more NICs than the node has");
  }
}

void plan_and_render(const NodeTopology& topology, BindingRequest request) {
  try {
    const BindingPlan plan = dtrain::topology::plan_binding(topology, request);
    check_plan(topology, request, plan);
    for (const auto& task : plan.tasks) (void)dtrain::topology::binding_environment(task);
    (void)dtrain::topology::render_binding_table(plan);
    (void)dtrain::topology::binding_to_json(topology, plan).dump();
  } catch (const dtrain::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // hwloc explains rejected XML on stderr, which would drown libFuzzer's own output.
  setenv("HWLOC_HIDE_ERRORS", "2", 0);
  // hwloc unloads its plugins (libxml2 import among them) with the last topology; one topology
  // kept for the whole run keeps them mapped, so leak reports can name their module.
  hwloc_topology_t plugin_keeper = nullptr;
  if (hwloc_topology_init(&plugin_keeper) != 0) std::abort();
  xml_fd = memfd_create("dtrain-fuzz-topology.xml", MFD_CLOEXEC);
  if (xml_fd < 0) {
    std::perror("dtrain fuzz: memfd_create");
    std::abort();
  }
  xml_path = "/proc/self/fd/" + std::to_string(xml_fd);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  write_input(data, size);
  NodeTopology topology;
  try {
    topology = dtrain::topology::load_topology(xml_path);
  } catch (const dtrain::Error&) {
    return 0;
  }
  require(topology.source == xml_path, "topology source");
  (void)dtrain::topology::render_closeness_matrix(topology);

  for (unsigned tasks : {1u, 2u, 3u, 8u}) {
    BindingRequest request;
    request.local_tasks = tasks;
    plan_and_render(topology, request);
  }
  // Slurm restricted the step to GPUs 1 and 0 of the node, seen unrenumbered by the tasks.
  BindingRequest restricted;
  restricted.local_tasks = 2;
  restricted.allowed_gpu_indices = std::vector<unsigned>{1, 0};
  restricted.numbering = dtrain::topology::GpuNumbering::kWholeNode;
  plan_and_render(topology, restricted);
  return 0;
}
