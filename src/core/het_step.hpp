// SPDX-License-Identifier: Apache-2.0
#pragma once
// A heterogeneous step (srun A : B) as one world. Pure: the components' layouts in, the world
// one node plans from out.
//
// What Slurm hands each node of a het step, read from its source (22.05 to 25.11):
// - srun sorts the union of the components' nodes (srun.c, _reorder_het_job_recs), and the
//   nodes' SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE follow that sorted order (env.c).
// - A task's SLURM_PROCID is its component's task offset + its task id, and its SLURM_NODEID is
//   its component's node offset + its node id (slurmstepd/task.c, exec_task), both counted in
//   component order. So SLURM_NODEID does not index SLURM_STEP_NODELIST when the components'
//   nodes do not sort in component order (GPU nodes "gpu[1-2]" : CPU nodes "cpu1").
// - The SPANK items of a node are its own component's; only slurmctld knows the others' layouts.
// dtrain therefore numbers nodes as Slurm's SLURM_NODEID does (component order), builds the
// world from every component's layout, and uses the sorted environment lists only to check
// that no component of the step is missing from the world.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::core {

// One component's step layout as slurmctld holds it.
struct ComponentLayout {
  std::vector<std::string> hosts;                    // the component's nodes, in its node order
  std::vector<std::vector<std::uint32_t>> task_ids;  // per node: the component's task ids there
  std::uint32_t task_count = 0;
};

// The answer to one component's layout request.
struct ComponentAnswer {
  std::uint32_t job_id = 0;
  std::optional<ComponentLayout> layout;
  // slurmctld answered that this component runs no such step (srun --het-group=1,2 leaves
  // component 0 out): the only failure that leaves a component out of the world.
  bool not_in_step = false;
  std::string error;  // any other failure (a timeout, a failover): the step must stop
};

struct HetWorld {
  std::uint32_t leader_job_id = 0;  // component 0's job id: ports derive from it on every node
  std::uint32_t own_component = 0;  // index into the answers
  std::uint32_t rank_offset = 0;    // tasks of the components before this node's
  std::uint32_t node_offset = 0;    // nodes of the components before this node's
  std::uint32_t node_count = 0;
  std::uint32_t task_count = 0;
  std::string nodelist;                 // every node, component order ("gpu1,gpu2,cpu1")
  std::string tasks_per_node;           // tasks on each node of `nodelist` ("2,2,1")
  std::string hosts_of_ranks;           // the host of every rank, in rank order
  std::vector<std::uint32_t> left_out;  // components not in this step (--het-group)
};

// Combines the components' answers (in component order) into the world of the node whose
// component has job id `own_job_id`. `step_nodelist` and `step_tasks_per_node` are the node's
// SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE (all components, sorted by Slurm): the world
// must hold exactly those nodes with those task counts. Throws dtrain::Error naming the
// component and the reason when an answer failed, when two components share a node, or when
// the world and the environment disagree; it never returns a smaller world than Slurm's.
HetWorld combine_het_components(const std::vector<ComponentAnswer>& answers,
                                std::uint32_t own_job_id, std::string_view step_nodelist,
                                std::string_view step_tasks_per_node);

}  // namespace dtrain::core
