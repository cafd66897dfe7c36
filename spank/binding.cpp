#include "spank/binding.hpp"

namespace dtrain::spank {

NodeBinding plan_node_binding(spank_t /*sp*/, const core::PluginConfig& /*config*/,
                              const core::StepPlan& /*plan*/, std::uint32_t /*local_tasks*/) {
  return {};
}

void apply_task_affinity(const std::vector<unsigned>& /*planned*/, bool /*report*/) {}

}  // namespace dtrain::spank
