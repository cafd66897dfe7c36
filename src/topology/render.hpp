// SPDX-License-Identifier: Apache-2.0
#pragma once
// Human and machine readable views of a topology and a binding plan (dtrain-plan).

#include <nlohmann/json.hpp>
#include <string>

#include "topology/binding.hpp"
#include "topology/node_topology.hpp"

namespace dtrain::topology {

// One row per local task: GPU bus ids, CUDA_VISIBLE_DEVICES, NICs with their class, CPUs,
// cores and NUMA nodes; then the plan's warnings.
std::string render_binding_table(const BindingPlan& plan);

// GPU x NIC closeness classes like `nvidia-smi topo -m` (rows: GPUs in PCI order, columns:
// NICs in PCI order, then each GPU's CPU and NUMA affinity), with legends.
std::string render_closeness_matrix(const NodeTopology& topology);

// Everything above as JSON, including each task's binding environment (dtrain-plan --json).
nlohmann::json binding_to_json(const NodeTopology& topology, const BindingPlan& plan);

}  // namespace dtrain::topology
