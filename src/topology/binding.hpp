// SPDX-License-Identifier: Apache-2.0
#pragma once
// The binding policy: which GPUs, NIC and CPUs each local task of a step gets. Pure: plain
// NodeTopology in, plain BindingPlan out, no hwloc, deterministic.
//
// Policy (see plan_binding):
//  - GPUs: usable GPUs are ordered by PCI bus id, grouped so that GPUs sharing a NUMA domain
//    stay together (domains in order of their first bus id; identical to PCI order whenever
//    bus ranges follow NUMA domains, as on every machine we know). With T tasks and G GPUs:
//    T <= G: each task gets a contiguous block; the first G % T tasks get one GPU more.
//    T >  G: each GPU gets a contiguous run of tasks; the first T % G GPUs get one task more.
//  - NICs: each GPU gets its closest NIC (Closeness, then same package); among equally close
//    NICs the choice is spread by a deterministic matching in PCI order, so two GPUs share a
//    NIC only when there are fewer such NICs than GPUs. HCAs (OpenFabrics devices) are the
//    candidates when the node has any; plain netdevs are used only on nodes without HCAs.
//    The node's fabric NICs (NCCL_IB_HCA) are all NICs closest to any of the node's GPUs.
//  - CPUs: a GPU's CPU domain is its locality (its NUMA domain). Each domain's cores are split
//    into equal contiguous shares among the tasks using a GPU there, in local-rank order (whole
//    cores; single PUs when there are more such tasks than cores). Without GPUs the machine's
//    NUMA nodes are shared out instead, never splitting a task across nodes when tasks >= nodes.
// The plan records the intended CPUs even when this host lacks them (a DGX XML on a laptop);
// apply_cpu_affinity() intersects with what the task may use.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/closeness.hpp"
#include "topology/cpu_list.hpp"
#include "topology/node_topology.hpp"

namespace dtrain::topology {

// How a task enumerates GPUs, which decides the numbers written to CUDA_VISIBLE_DEVICES
// (always with CUDA_DEVICE_ORDER=PCI_BUS_ID).
enum class GpuNumbering {
  // The task sees only the step's allowed GPUs (Slurm's cgroup ConstrainDevices=yes): they are
  // renumbered 0..n-1 in PCI bus order.
  kAllowedOnly,
  // The task sees every GPU of the node: numbers are positions among all GPUs in PCI order.
  kWholeNode,
};

struct BindingRequest {
  unsigned local_tasks = 1;
  // GPUs Slurm allowed for the step, by PCI bus id (any case; a domain of up to 8 digits as
  // nvidia-smi prints it is accepted). Unset: every GPU of the topology.
  std::optional<std::vector<std::string>> allowed_gpu_bus_ids;
  // The same as indices into the node's GPUs sorted by PCI bus id: the CUDA_VISIBLE_DEVICES
  // value Slurm sets when devices are not constrained, and SLURM_STEP_GPUS / SLURM_JOB_GPUS with
  // gres.conf AutoDetect=nvml (which numbers GPUs in PCI order). Use parse_gpu_index_list().
  // Setting both allowed_gpu_bus_ids and allowed_gpu_indices is an error.
  std::optional<std::vector<unsigned>> allowed_gpu_indices;
  GpuNumbering numbering = GpuNumbering::kAllowedOnly;
  // The node view (core::GpuView): when every task gets exactly one GPU, each task's
  // CUDA_VISIBLE_DEVICES lists all the tasks' GPUs in local-rank order, so that device
  // `local_rank` is its own. Otherwise (several GPUs per task, several tasks per GPU) each task
  // sees its own GPUs only, whatever this says.
  bool node_view = false;
};

struct NicChoice {
  std::string bus_id;
  std::string hca;                        // empty for a plain netdev
  std::string netdev;                     // empty when the NIC has none (EFA)
  unsigned port = 0;                      // 0 when unknown
  Closeness closeness = Closeness::kSys;  // to the GPU it was chosen for
};

struct TaskBinding {
  unsigned local_rank = 0;
  std::vector<std::string> gpu_bus_ids;  // PCI order; empty for a CPU-only task
  std::string cuda_visible_devices;      // in the task's own numbering; empty when no GPU
  // The task's own GPUs as CUDA device indices, i.e. positions in cuda_visible_devices:
  // {local_rank} in the node view, {0, 1, ...} otherwise. PCI order, like gpu_bus_ids.
  std::vector<unsigned> device_indices;
  // The task's own GPUs in the request's numbering (the numbers cuda_visible_devices is made of).
  std::vector<unsigned> gpu_numbers;
  std::vector<NicChoice> nics;  // distinct NICs of its GPUs, in GPU order
  // Every NIC closest to some GPU of the node, PCI order; the same for every GPU task of the
  // node (closeness is not meaningful here). Empty for a CPU-only task.
  std::vector<NicChoice> node_nics;
  CpuList cpus;                      // PU os indexes
  unsigned cores = 0;                // cores touched by `cpus` (OMP_NUM_THREADS)
  std::vector<unsigned> numa_nodes;  // NUMA nodes holding `cpus`
};

struct BindingPlan {
  std::vector<TaskBinding> tasks;  // index = local rank
  std::vector<std::string> warnings;
};

// Throws Error(kInvalidInput) for a bad request and Error(kMismatch) when the allowed GPUs are
// not in the topology (the XML describes another machine).
BindingPlan plan_binding(const NodeTopology& topology, const BindingRequest& request);

// Parses a comma-separated GPU index list such as "2,3,6" (CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS).
// Throws Error(kInvalidInput) naming `what`, e.g. for UUIDs or MIG names.
std::vector<unsigned> parse_gpu_index_list(std::string_view text, std::string_view what);

}  // namespace dtrain::topology
