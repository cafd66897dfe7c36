// SPDX-License-Identifier: Apache-2.0
#include "plan/plan_binding.hpp"

#include "core/error.hpp"
#include "topology/binding.hpp"
#include "topology/load_io.hpp"
#include "topology/render.hpp"

namespace dtrain::plan {

nlohmann::json report_binding(std::ostream& out, const std::string& topology_xml,
                              const core::StepPlan& plan, std::uint32_t node) {
  if (node >= plan.layout.node_count()) {
    throw Error(ErrorKind::kInvalidInput, "--node " + std::to_string(node) +
                                              " is outside the step's " +
                                              std::to_string(plan.layout.node_count()) + " nodes");
  }
  const auto topo = topology::load_topology(topology_xml);
  topology::BindingRequest request;
  request.local_tasks = plan.layout.local_world_size(node);
  const auto binding = topology::plan_binding(topo, request);
  out << "# binding of the " << request.local_tasks << " tasks on " << plan.layout.hosts[node]
      << " (" << topology_xml << ")\n"
      << topology::render_binding_table(binding) << "\n"
      << topology::render_closeness_matrix(topo);
  return topology::binding_to_json(topo, binding);
}

}  // namespace dtrain::plan
