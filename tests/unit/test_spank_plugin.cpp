// SPDX-License-Identifier: Apache-2.0
// Drives the real SPANK callbacks through the spank_* fake.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string_view>

#include <slurm/slurm.h>

#include "spank/state.hpp"
#include "spank_fake.hpp"
#include "spank_test.hpp"
#include "topology/load_io.hpp"
#include "topology/summary.hpp"

using dtrain::testing::fake;
using dtrain::testing::handle;

namespace {

int call_init(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return slurm_spank_init(handle(), static_cast<int>(argv.size()), argv.data());
}

class SpankPlugin : public dtrain::testing::SpankTest {
 protected:
  // node2 of `srun -N4 -n8`: 4,2,1(x2), so this node runs global ranks 4 and 5.
  void remote_step_on_node2() {
    fake().context = S_CTX_REMOTE;
    fake().items = {{S_JOB_ID, 77},    {S_JOB_STEPID, 0},           {S_JOB_NODEID, 1},
                    {S_JOB_NNODES, 4}, {S_JOB_TOTAL_TASK_COUNT, 8}, {S_JOB_LOCAL_TASK_COUNT, 2}};
    fake().local_to_global = {4, 5};
    fake().job_env = {{"SLURM_STEP_NODELIST", "node[1-4]"},
                      {"SLURM_STEP_TASKS_PER_NODE", "4,2,1(x2)"},
                      {"SLURM_DISTRIBUTION", "block"}};
  }

  // The registered option called `name`, or nullptr.
  static const spank_option* option(const char* name) {
    for (const spank_option* registered : fake().options) {
      if (std::string_view(registered->name) == name) return registered;
    }
    return nullptr;
  }

  int use_option(const char* value, const char* name = "distributed-train") {
    const spank_option* registered = option(name);
    EXPECT_NE(registered, nullptr) << name;
    return registered ? registered->cb(registered->val, value, 1) : -1;
  }
};

}  // namespace

TEST_F(SpankPlugin, RegistersTheOptionWithOptionalValue) {
  fake().context = S_CTX_LOCAL;
  ASSERT_EQ(call_init({}), 0);
  ASSERT_EQ(fake().options.size(), 2u);
  EXPECT_STREQ(fake().options[0]->name, "distributed-train");
  EXPECT_EQ(fake().options[0]->has_arg, 2);
  // The GPU view takes a value, always.
  EXPECT_STREQ(fake().options[1]->name, "distributed-train-gpu-view");
  EXPECT_EQ(fake().options[1]->has_arg, 1);
}

TEST_F(SpankPlugin, BadOptionValueFailsInSrunListingValidValues) {
  fake().context = S_CTX_LOCAL;
  ASSERT_EQ(call_init({}), 0);
  EXPECT_EQ(use_option("torch,caffe"), -1);
  ASSERT_EQ(fake().errors.size(), 1u);
  EXPECT_NE(fake().errors[0].find("dtrain: "), std::string::npos);
  EXPECT_NE(fake().errors[0].find("'caffe'"), std::string::npos);
  EXPECT_NE(fake().errors[0].find("torch, paddle, tf"), std::string::npos);
  EXPECT_EQ(use_option("torch,paddle"), 0);
}

TEST_F(SpankPlugin, BadPlugstackArgumentFailsAtLoadNamingTheKey) {
  fake().context = S_CTX_REMOTE;
  EXPECT_EQ(call_init({"ports=30000-20000"}), -1);
  EXPECT_TRUE(logged("'ports'"));
  fake().errors.clear();
  EXPECT_EQ(call_init({"colour=blue"}), -1);
  EXPECT_TRUE(logged("unknown plugstack argument 'colour'"));
}

TEST_F(SpankPlugin, SlurmdNeverFailsAndRegistersNothing) {
  fake().context = S_CTX_SLURMD;
  EXPECT_EQ(call_init({"colour=blue"}), 0);
  EXPECT_TRUE(logged("unknown plugstack argument 'colour'"));
  EXPECT_TRUE(fake().options.empty());
  EXPECT_EQ(call_init({"topology_cache=/proc/no-such-dir/dtrain"}), 0);
  EXPECT_TRUE(logged("no topology cache"));
}

TEST_F(SpankPlugin, SlurmdCachesTheLiveTopologyAndStepsUseIt) {
  if (geteuid() != 0) GTEST_SKIP() << "the topology cache must be owned by root";
  const auto dir =
      std::filesystem::temp_directory_path() / ("dtrain-cache-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(
      dir, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
               std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
               std::filesystem::perms::others_exec);
  const auto cache = dir / "cache";
  fake().context = S_CTX_SLURMD;
  ASSERT_EQ(call_init({"topology_cache=" + cache.string()}), 0);
  ASSERT_TRUE(fake().errors.empty()) << fake().errors[0];
  ASSERT_TRUE(std::filesystem::is_regular_file(cache / "topology.xml"));
  ASSERT_TRUE(std::filesystem::is_regular_file(cache / "topology.summary.json"));

  // Steps load whatever the cache holds, the summary first: plant a GPU machine there and see
  // it bound, then the same machine as XML alone.
  const auto gpus_of_task_1 = [&] {
    dtrain::testing::reset_fake();
    dtrain::spank::state() = dtrain::spank::PluginState{};
    remote_step_on_node2();
    EXPECT_EQ(call_init({"address=name", "topology_cache=" + cache.string()}), 0);
    EXPECT_EQ(use_option(nullptr), 0);
    EXPECT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(task(1, 5), 0);
    ::testing::internal::GetCapturedStderr();
    return fake().job_env["CUDA_VISIBLE_DEVICES"];
  };
  {
    std::ofstream summary(cache / "topology.summary.json", std::ios::trunc);
    summary << dtrain::topology::to_summary(
        dtrain::topology::load_topology(DTRAIN_FIXTURES "/dgx-h100.xml"));
  }
  EXPECT_EQ(gpus_of_task_1(), "4,5,6,7");
  std::filesystem::remove(cache / "topology.summary.json");
  std::filesystem::copy_file(DTRAIN_FIXTURES "/dgx-h100.xml", cache / "topology.xml",
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_EQ(gpus_of_task_1(), "4,5,6,7");
  // A summary of another format is a lost shortcut, not an error: the XML serves.
  {
    std::ofstream summary(cache / "topology.summary.json", std::ios::trunc);
    summary << R"({"dtrain_topology_summary":99})";
  }
  EXPECT_EQ(gpus_of_task_1(), "4,5,6,7");
  EXPECT_TRUE(fake().errors.empty());
  std::filesystem::remove_all(dir);
}

TEST_F(SpankPlugin, WithoutTheOptionNothingChanges) {
  remote_step_on_node2();
  ASSERT_EQ(call_init({"address=name"}), 0);
  const auto before = fake().job_env;
  ASSERT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  ASSERT_EQ(task(0, 4), 0);
  EXPECT_EQ(fake().job_env, before);
  EXPECT_TRUE(fake().errors.empty());
}

TEST_F(SpankPlugin, ExportsEveryFamilyForEachTask) {
  remote_step_on_node2();
  ASSERT_EQ(call_init({"address=name"}), 0);
  ASSERT_EQ(use_option(nullptr), 0);
  ASSERT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  ASSERT_EQ(task(1, 5), 0) << (fake().errors.empty() ? "" : fake().errors[0]);
  auto& env = fake().job_env;
  EXPECT_EQ(env["DTRAIN_RANK"], "5");
  EXPECT_EQ(env["RANK"], "5");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(env["GROUP_RANK"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "8");
  EXPECT_EQ(env["PADDLE_TRAINER_ID"], "5");
  EXPECT_EQ(env["MASTER_ADDR"], "node1");
  const std::string endpoints = env["DTRAIN_ENDPOINTS"];
  EXPECT_EQ(env["PADDLE_TRAINER_ENDPOINTS"], endpoints);
  EXPECT_EQ(env["DTRAIN_CURRENT_ENDPOINT"].rfind("node2:", 0), 0u);
  EXPECT_NE(env["TF_CONFIG"].find(R"("index":5)"), std::string::npos);
  EXPECT_NE(env["MASTER_PORT"], "");
  EXPECT_EQ(env["PADDLE_DISTRI_BACKEND"], "gloo");  // no GPU on this machine
  // The plugin's own time on the node, for slurmd's log at debug level.
  ASSERT_EQ(fake().debugs.size(), 2u);
  EXPECT_EQ(fake().debugs[0].rfind("dtrain: user_init on node 1 (node2), 2 local tasks: ", 0), 0u)
      << fake().debugs[0];
  EXPECT_NE(fake().debugs[0].find(" ms (plan "), std::string::npos) << fake().debugs[0];
  EXPECT_NE(fake().debugs[0].find(", environment "), std::string::npos) << fake().debugs[0];
  EXPECT_EQ(fake().debugs[1].rfind("dtrain: task_init of local task 1: ", 0), 0u)
      << fake().debugs[1];
}

// pyxis copies one task's environment into every task except the names PYXIS_CONTAINER_ENV
// lists (core/container_env.hpp): the list must hold every name the plugin sets.
TEST_F(SpankPlugin, ContainerPluginsAreToldToKeepEveryTaskVariable) {
  const auto set_names = [](std::vector<std::string> args, std::uint32_t nodes,
                            std::uint32_t tasks_per_node, const char* suffix) {
    dtrain::testing::reset_fake();
    dtrain::spank::state() = dtrain::spank::PluginState{};
    fake().context = S_CTX_REMOTE;
    fake().items = {{S_JOB_ID, 79},
                    {S_JOB_STEPID, 0},
                    {S_JOB_NODEID, 0},
                    {S_JOB_NNODES, nodes},
                    {S_JOB_TOTAL_TASK_COUNT, nodes * tasks_per_node},
                    {S_JOB_LOCAL_TASK_COUNT, tasks_per_node}};
    for (std::uint32_t i = 0; i < tasks_per_node; ++i) fake().local_to_global.push_back(i);
    fake().job_env = {{"SLURM_STEP_NODELIST", "node[1-" + std::to_string(nodes) + "]"},
                      {"SLURM_STEP_TASKS_PER_NODE",
                       std::to_string(tasks_per_node) + "(x" + std::to_string(nodes) + ")"},
                      {"SLURM_JOB_ID", "79"},
                      {"SLURM_STEP_ID", "0"}};
    args.push_back(std::string("suffix=") + suffix);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    EXPECT_EQ(slurm_spank_init(handle(), static_cast<int>(argv.size()), argv.data()), 0);
    EXPECT_EQ(fake().options.at(0)->cb(fake().options[0]->val, nullptr, 1), 0);
    EXPECT_EQ(slurm_spank_init_post_opt(handle(), 0, nullptr), 0);
    const std::string keep = fake().job_env["PYXIS_CONTAINER_ENV"];
    const auto before = fake().job_env;
    EXPECT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
    fake().task_id = 1;
    fake().items[S_TASK_GLOBAL_ID] = 1;
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(slurm_spank_task_init(handle(), 0, nullptr), 0)
        << (fake().errors.empty() ? "" : fake().errors[0]);
    ::testing::internal::GetCapturedStderr();
    std::vector<std::string> missing;
    std::size_t set = 0;
    for (const auto& [name, value] : fake().job_env) {
      if (before.count(name) && before.at(name) == value) continue;
      ++set;
      if (("," + keep + ",").find("," + name + ",") == std::string::npos) missing.push_back(name);
    }
    EXPECT_GT(set, 30u);
    EXPECT_TRUE(missing.empty()) << "not in PYXIS_CONTAINER_ENV: "
                                 << ::testing::PrintToString(missing);
    // The program sees the user's own environment: the plugin's request is gone again.
    EXPECT_EQ(fake().job_env.count("PYXIS_CONTAINER_ENV"), 0u);
  };
  // Every framework, GPUs, NICs and CPUs bound from a DGX topology.
  set_names({"address=name", "topology=" DTRAIN_FIXTURES "/dgx-h100.xml"}, 4, 8, "");
  // Lists too long for execve: their NAME_FILE forms.
  set_names({"address=name", "topology=none"}, 2048, 8, "-a-rather-long-interconnect-name");
}

TEST_F(SpankPlugin, ContainerRequestOfTheUserIsExtendedThenRestored) {
  remote_step_on_node2();
  fake().job_env["PYXIS_CONTAINER_ENV"] = "MY_VAR,RANK";
  ASSERT_EQ(call_init({"address=name"}), 0);
  ASSERT_EQ(use_option(nullptr), 0);
  ASSERT_EQ(slurm_spank_init_post_opt(handle(), 0, nullptr), 0);
  const std::string keep = fake().job_env["PYXIS_CONTAINER_ENV"];
  EXPECT_EQ(keep.rfind("MY_VAR,RANK,DTRAIN_RANK,", 0), 0u) << keep;
  EXPECT_EQ(keep.find(",RANK,", 7), std::string::npos) << "RANK twice: " << keep;
  ASSERT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  ASSERT_EQ(task(0, 4), 0);
  EXPECT_EQ(fake().job_env["PYXIS_CONTAINER_ENV"], "MY_VAR,RANK");
}

TEST_F(SpankPlugin, UserValuesOfBindingVariablesAreKept) {
  remote_step_on_node2();
  fake().job_env["PADDLE_DISTRI_BACKEND"] = "nccl";
  ASSERT_EQ(call_init({"address=name"}), 0);
  ASSERT_EQ(use_option(nullptr), 0);
  ASSERT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  ASSERT_EQ(task(0, 4), 0);
  EXPECT_EQ(fake().job_env["PADDLE_DISTRI_BACKEND"], "nccl");
  bool said = false;
  for (const auto& m : fake().infos)
    said = said || m.find("keeping the user's") != std::string::npos;
  EXPECT_TRUE(said);
}

// pyxis, loaded before dtrain, copies a container's environment into the task between
// user_init and dtrain's task_init: its values are not the user's.
TEST_F(SpankPlugin, OnlyWhatTheUserSetBeforeTheTasksIsKept) {
  remote_step_on_node2();
  fake().job_env["FLAGS_selected_gpus"] = "1";
  ASSERT_EQ(call_init({"address=name", "topology=" DTRAIN_FIXTURES "/dgx-h100.xml"}), 0);
  ASSERT_EQ(use_option(nullptr), 0);
  ASSERT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  fake().job_env["FLAGS_selected_gpus"] = "0";  // the container's, over the user's
  fake().job_env["OMP_NUM_THREADS"] = "1";      // enroot's PyTorch hook's, not the user's
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(task(0, 4), 0);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(fake().job_env["FLAGS_selected_gpus"], "1");
  // The task's cores: half of a DGX node for each of this node's two tasks.
  EXPECT_GT(std::stoi(fake().job_env["OMP_NUM_THREADS"]), 1);
}

TEST_F(SpankPlugin, FrameworkSelectionLimitsTheNames) {
  remote_step_on_node2();
  ASSERT_EQ(call_init({"address=name"}), 0);
  ASSERT_EQ(use_option("paddle"), 0);
  ASSERT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  ASSERT_EQ(task(0, 4), 0);
  EXPECT_EQ(fake().job_env.count("RANK"), 0u);
  EXPECT_EQ(fake().job_env.count("TF_CONFIG"), 0u);
  EXPECT_EQ(fake().job_env["PADDLE_TRAINER_ID"], "4");
  EXPECT_EQ(fake().job_env["DTRAIN_RANK"], "4");
}

TEST_F(SpankPlugin, UserInitErrorsAreLoggedOnceAndStopEveryTask) {
  remote_step_on_node2();
  fake().local_to_global = {4, 6};  // Slurm says otherwise than the derived layout
  ASSERT_EQ(call_init({"address=name"}), 0);
  ASSERT_EQ(use_option(nullptr), 0);
  EXPECT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  EXPECT_EQ(fake().errors.size(), 1u);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(task(0, 4), -1);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(logged("layout mismatch")) << (fake().errors.empty() ? "" : fake().errors[0]);
  EXPECT_TRUE(logged("[4,6]"));
  EXPECT_EQ(fake().job_env.count("RANK"), 0u);
  // The user asked for --distributed-train: the task ends before exec, whatever plugstack says.
  EXPECT_EQ(ended_with(), 1);
  EXPECT_NE(said.find("dtrain: error: the task stops before its program starts"), std::string::npos)
      << said;
}

TEST_F(SpankPlugin, WithoutTheOptionAFailedTaskIsLeftToSlurm) {
  remote_step_on_node2();
  fake().local_to_global = {4, 6};
  ASSERT_EQ(call_init({"address=name", "enable=always"}), 0);
  EXPECT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  EXPECT_EQ(task(0, 4), -1);
  EXPECT_EQ(ended_with(), -1);  // enable=always: plugstack's optional/required decides
}

TEST_F(SpankPlugin, UnresolvableSuffixFailsTheTaskNamingTheHost) {
  remote_step_on_node2();
  ASSERT_EQ(call_init({"suffix=-nonexistent-ib.invalid"}), 0);
  ASSERT_EQ(use_option(nullptr), 0);
  ASSERT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  EXPECT_EQ(task(0, 4), -1);
  EXPECT_TRUE(logged("node1-nonexistent-ib.invalid"));
}

TEST_F(SpankPlugin, SpankFailuresBecomeErrorsNotExceptions) {
  remote_step_on_node2();
  ASSERT_EQ(call_init({"address=name"}), 0);
  ASSERT_EQ(use_option(nullptr), 0);
  ASSERT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  fake().fail_setenv_calls = 1;
  EXPECT_EQ(task(0, 4), -1);
  EXPECT_TRUE(logged("spank_setenv"));
  fake().items.erase(S_JOB_STEPID);
  EXPECT_EQ(slurm_spank_user_init(handle(), 0, nullptr), -1);
}

TEST_F(SpankPlugin, TaskStartedOutOfPlanIsRefused) {
  remote_step_on_node2();
  ASSERT_EQ(call_init({"address=name"}), 0);
  ASSERT_EQ(use_option(nullptr), 0);
  ASSERT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  EXPECT_EQ(task(0, 5), -1);
  EXPECT_EQ(task(7, 5), -1);
}

TEST_F(SpankPlugin, BatchStepIsLeftAlone) {
  remote_step_on_node2();
  fake().items[S_JOB_STEPID] = SLURM_BATCH_SCRIPT;
  ASSERT_EQ(call_init({"address=name", "enable=always"}), 0);
  ASSERT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  ASSERT_EQ(task(0, 4), 0);
  EXPECT_EQ(fake().job_env.count("RANK"), 0u);
}

TEST_F(SpankPlugin, OversizedValuesGoToMemoryFilesAndTheTaskStillStarts) {
  // 16384 ranks on 2048 nodes with a long suffix: the endpoint list is far over 128 KiB.
  fake().context = S_CTX_REMOTE;
  fake().items = {{S_JOB_ID, 78},
                  {S_JOB_STEPID, 3},
                  {S_JOB_NODEID, 0},
                  {S_JOB_NNODES, 2048},
                  {S_JOB_TOTAL_TASK_COUNT, 16384},
                  {S_JOB_LOCAL_TASK_COUNT, 8}};
  for (std::uint32_t i = 0; i < 8; ++i) fake().local_to_global.push_back(i);
  fake().job_env = {{"SLURM_STEP_NODELIST", "node[1-2048]"},
                    {"SLURM_STEP_TASKS_PER_NODE", "8(x2048)"},
                    {"SLURM_JOB_ID", "78"},
                    {"SLURM_STEP_ID", "3"},
                    // A batch script's own TF_CONFIG, and an outer step's list file.
                    {"TF_CONFIG", R"({"cluster":{"worker":["a:1"]},"task":{"index":0}})"},
                    {"DTRAIN_ENDPOINTS_FILE", "/proc/self/fd/999"}};
  ASSERT_EQ(call_init({"address=name", "suffix=-a-rather-long-interconnect-name"}), 0);
  ASSERT_EQ(use_option(nullptr), 0);
  ASSERT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(task(0, 0), 0) << (fake().errors.empty() ? "" : fake().errors[0]);
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  auto& env = fake().job_env;
  EXPECT_EQ(env.count("DTRAIN_ENDPOINTS"), 0u);
  ASSERT_EQ(env.count("DTRAIN_ENDPOINTS_FILE"), 1u);
  ASSERT_EQ(env.count("TF_CONFIG_FILE"), 1u);
  std::ifstream file(env["DTRAIN_ENDPOINTS_FILE"]);
  std::string endpoints((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_GT(endpoints.size(), 131072u);
  EXPECT_EQ(std::count(endpoints.begin(), endpoints.end(), ','), 16383);
  EXPECT_EQ(endpoints.rfind("node1-a-rather-long-interconnect-name:", 0), 0u);
  // The once-per-step warning, on rank 0's stderr where the user sees it.
  EXPECT_NE(warnings.find("dtrain: warning: DTRAIN_ENDPOINTS"), std::string::npos) << warnings;
  // A memory file of this (the task's) process, named after the task and the values it holds:
  // nothing on disk to leave behind.
  const std::string path = env["DTRAIN_ENDPOINTS_FILE"];
  EXPECT_EQ(path.rfind("/proc/self/fd/", 0), 0u) << path;
  EXPECT_NE(path, "/proc/self/fd/999");
  char target[256] = {};
  ASSERT_GT(readlink(path.c_str(), target, sizeof target - 1), 0);
  EXPECT_EQ(std::string(target),
            "/memfd:dtrain:78.3:rank0:DTRAIN_ENDPOINTS,PADDLE_TRAINER_ENDPOINTS (deleted)");
  // The inherited TF_CONFIG is gone: TensorFlow must not read it beside TF_CONFIG_FILE.
  EXPECT_EQ(env.count("TF_CONFIG"), 0u);
  EXPECT_EQ(env.count("TF_CONFIG_HASH"), 1u);
  std::set<std::string> paths;
  for (const char* name :
       {"DTRAIN_ENDPOINTS_FILE", "PADDLE_TRAINER_ENDPOINTS_FILE", "TF_CONFIG_FILE"}) {
    paths.insert(env[name]);
  }
  EXPECT_EQ(paths.size(), 2u);
  for (const auto& memory_file : paths) {
    close(std::stoi(memory_file.substr(memory_file.rfind('/') + 1)));
  }
}

// node_check=on: each task gets the write end of slurmstepd's fault hint pipe, and slurmstepd,
// as root when the step ends, keeps the valid lines its tasks wrote in a root-only file that
// the epilog reads (spank/slurmstepd_root_fault_hint.hpp). The task runs in a child process, as
// slurmstepd forks it, so that closing the read end there leaves slurmstepd's open.
TEST_F(SpankPlugin, NodeCheckGivesEachTaskTheFaultHintPipeAndRootKeepsValidLines) {
  if (geteuid() != 0) GTEST_SKIP() << "the fault hint directory must be owned by root";
  const auto dir =
      std::filesystem::temp_directory_path() / ("dtrain-hint-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  const std::string cache = (dir / "run").string();
  remote_step_on_node2();
  ASSERT_EQ(
      call_init({"address=name", "node_check=on", "topology=none", "topology_cache=" + cache}), 0);
  ASSERT_EQ(use_option(nullptr), 0);
  ASSERT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (task(1, 5) != 0) _exit(2);
    const int fd = std::stoi(fake().job_env["DTRAIN_FAULT_HINT_FD"]);
    struct stat pipe_stat {};
    if (fstat(fd, &pipe_stat) != 0 || fake().job_env["DTRAIN_FAULT_HINT_PIPE"] !=
                                          "pipe:[" + std::to_string(pipe_stat.st_ino) + "]") {
      _exit(4);
    }
    const std::string lines = "not a hint\nsuspect node2 preflight\nsuspect ../x y\n";
    _exit(write(fd, lines.data(), lines.size()) == static_cast<ssize_t>(lines.size()) ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_EQ(slurm_spank_exit(handle(), 0, nullptr), 0);
  EXPECT_TRUE(fake().errors.empty()) << fake().errors[0];
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  const auto file = std::filesystem::path(cache) / "fault-hints" / ("77.0." + std::string(host));
  ASSERT_TRUE(std::filesystem::is_regular_file(file));
  std::ifstream in(file);
  const std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "suspect node2 preflight\n");
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
  EXPECT_EQ(dtrain::spank::state().fault_hint_read_fd, -1);
  EXPECT_EQ(dtrain::spank::state().fault_hint_write_fd, -1);
  bool said_rejected = false;
  for (const auto& info : fake().infos) {
    said_rejected = said_rejected || info.find("2 line(s) that are not") != std::string::npos;
  }
  EXPECT_TRUE(said_rejected);
  std::filesystem::remove_all(dir);
}

TEST_F(SpankPlugin, WithoutNodeCheckTasksGetNoFaultHintPipe) {
  remote_step_on_node2();
  ASSERT_EQ(call_init({"address=name"}), 0);
  ASSERT_EQ(use_option(nullptr), 0);
  ASSERT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  ASSERT_EQ(task(1, 5), 0);
  EXPECT_EQ(fake().job_env.count("DTRAIN_FAULT_HINT_FD"), 0U);
  EXPECT_EQ(fake().job_env.count("DTRAIN_FAULT_HINT_PIPE"), 0U);
  EXPECT_EQ(slurm_spank_exit(handle(), 0, nullptr), 0);
  EXPECT_TRUE(fake().errors.empty());
}
