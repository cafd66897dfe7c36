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

char kName[] = "distributed-train";
char kArgInfo[] = "[FRAMEWORKS]";
char kUsage[] =
    "Export rank, world size and ordered endpoints for distributed training "
    "(FRAMEWORKS: torch,paddle,tf or all; without a value, the site's frameworks= in "
    "plugstack.conf, all unless set) and bind GPUs, NICs and CPUs.";

struct spank_option distributed_train_option = {kName, kArgInfo, kUsage,
                                                2,     0,        on_distributed_train};

}  // namespace

int register_options(spank_t sp) {
  const spank_err_t rc = spank_option_register(sp, &distributed_train_option);
  if (rc != ESPANK_SUCCESS) {
    log_error(std::string("cannot register --distributed-train: ") + spank_strerror(rc));
    return -1;
  }
  return 0;
}

}  // namespace dtrain::spank
