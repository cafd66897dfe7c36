// SPDX-License-Identifier: Apache-2.0
#include "spank/srun_options.hpp"

#include <string_view>

#include "core/error.hpp"
#include "spank/spank_io.hpp"
#include "spank/state.hpp"

namespace dtrain::spank {
namespace {

// Runs in srun/sbatch (where a bad value stops the launch) and again in slurmstepd.
int on_distributed_train(int /*val*/, const char* optarg, int /*remote*/) noexcept {
  try {
    // sbatch forwards a value-less option to srun through the environment as "(null)".
    const std::string_view value = (optarg && std::string_view(optarg) != "(null)") ? optarg : "";
    state().option_frameworks = core::parse_frameworks(value);
    state().option_given = true;
    return 0;
  } catch (const std::exception& e) {
    log_error(std::string("--distributed-train: ") + e.what());
    return -1;
  } catch (...) {
    log_error("--distributed-train: unexpected error");
    return -1;
  }
}

int on_gpu_view(int /*val*/, const char* optarg, int /*remote*/) noexcept {
  try {
    const std::string_view value = optarg ? optarg : "";
    state().option_gpu_view = core::parse_gpu_view(value, "--distributed-train-gpu-view");
    return 0;
  } catch (const std::exception& e) {
    log_error(e.what());
    return -1;
  } catch (...) {
    log_error("--distributed-train-gpu-view: unexpected error");
    return -1;
  }
}

char kName[] = "distributed-train";
char kArgInfo[] = "[FRAMEWORKS]";
char kUsage[] =
    "Export rank, world size and ordered endpoints for distributed training "
    "(FRAMEWORKS: torch,paddle,tf or all; without a value, the site's frameworks= in "
    "plugstack.conf, all unless set) and bind GPUs, NICs and CPUs.";

struct spank_option distributed_train_option = {kName, kArgInfo, kUsage,
                                                2,     0,        on_distributed_train};

char kGpuViewName[] = "distributed-train-gpu-view";
char kGpuViewArgInfo[] = "VIEW";
char kGpuViewUsage[] =
    "With --distributed-train, which GPUs a task given one GPU sees: node (the step's GPUs of "
    "its node, device LOCAL_RANK its own), task (its own only, as device 0) or auto (node "
    "unless only tf is exported); default: the site's gpu_view= in plugstack.conf, auto unless "
    "set.";

struct spank_option gpu_view_option = {kGpuViewName, kGpuViewArgInfo, kGpuViewUsage, 1, 0,
                                       on_gpu_view};

}  // namespace

int register_options(spank_t sp) {
  for (spank_option* option : {&distributed_train_option, &gpu_view_option}) {
    const spank_err_t rc = spank_option_register(sp, option);
    if (rc != ESPANK_SUCCESS) {
      log_error(std::string("cannot register --") + option->name + ": " + spank_strerror(rc));
      return -1;
    }
  }
  return 0;
}

}  // namespace dtrain::spank
