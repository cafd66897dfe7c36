// SPDX-License-Identifier: Apache-2.0
// One step through both of the plugin's consumers of the planner: the SPANK callbacks (with
// the spank_* fake standing in for slurmstepd) and dtrain-plan --env all --json. Every task's
// environment must be the same, variable for variable, binding and spilled values included.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include <slurm/slurm.h>

#include "spank/state.hpp"
#include "spank_fake.hpp"

using dtrain::testing::fake;
using dtrain::testing::handle;

namespace {

using Env = std::map<std::string, std::string>;

struct Step {
  std::string nodelist;
  std::string tasks_per_node;
  std::uint32_t nnodes = 0;
  std::uint32_t ntasks = 0;
  std::uint32_t node = 0;
  std::vector<std::uint32_t> local_ranks;
  std::vector<std::string> plugstack_args;
  std::string option;  // --distributed-train's value; "" for none
};

// What the plugin exports to each local task: the task's environment after task_init, less
// what the job had before.
std::vector<Env> plugin_environments(const Step& step) {
  dtrain::testing::reset_fake();
  dtrain::spank::state() = dtrain::spank::PluginState{};
  fake().context = S_CTX_REMOTE;
  fake().items = {{S_JOB_ID, 77},
                  {S_JOB_STEPID, 3},
                  {S_JOB_NODEID, step.node},
                  {S_JOB_NNODES, step.nnodes},
                  {S_JOB_TOTAL_TASK_COUNT, step.ntasks},
                  {S_JOB_LOCAL_TASK_COUNT, static_cast<std::uint32_t>(step.local_ranks.size())}};
  fake().local_to_global = step.local_ranks;
  const Env job = {{"SLURM_STEP_NODELIST", step.nodelist},
                   {"SLURM_STEP_TASKS_PER_NODE", step.tasks_per_node},
                   {"SLURM_DISTRIBUTION", "block"},
                   {"SLURM_JOB_ID", "77"},
                   {"SLURM_STEP_ID", "3"}};
  fake().job_env = job;
  std::vector<std::string> args = step.plugstack_args;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  EXPECT_EQ(slurm_spank_init(handle(), static_cast<int>(argv.size()), argv.data()), 0);
  EXPECT_EQ(fake().options.at(0)->cb(0, step.option.empty() ? nullptr : step.option.c_str(), 1), 0);
  EXPECT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  std::vector<Env> out;
  for (std::size_t local = 0; local < step.local_ranks.size(); ++local) {
    fake().job_env = job;
    fake().task_id = static_cast<int>(local);
    fake().items[S_TASK_GLOBAL_ID] = step.local_ranks[local];
    EXPECT_EQ(slurm_spank_task_init(handle(), 0, nullptr), 0)
        << (fake().errors.empty() ? "" : fake().errors.back());
    Env exported;
    std::set<int> memory_files;  // names with equal values share one
    for (const auto& [name, value] : fake().job_env) {
      if (job.count(name)) continue;
      // A memory file's path names this process's descriptor: compare what it holds.
      if (name.ends_with("_FILE") && value.rfind("/proc/self/fd/", 0) == 0) {
        std::ifstream in(value);
        exported[name] = std::string(std::istreambuf_iterator<char>(in), {});
        memory_files.insert(std::stoi(value.substr(value.rfind('/') + 1)));
      } else {
        exported[name] = value;
      }
    }
    for (int fd : memory_files) close(fd);
    out.push_back(std::move(exported));
  }
  return out;
}

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// dtrain-plan's environment of each of the node's ranks, in local-rank order.
std::vector<Env> plan_environments(const Step& step, const std::filesystem::path& work) {
  const auto json_file = work / "plan.json";
  std::string cmd = std::string(DTRAIN_PLAN_TOOL) + " --nodelist " + quoted(step.nodelist) +
                    " --tasks-per-node " + quoted(step.tasks_per_node) +
                    " --job-id 77 --step-id 3 --env all --json " + quoted(json_file.string());
  if (!step.option.empty()) cmd += " --frameworks " + quoted(step.option);
  if (!step.plugstack_args.empty()) {
    cmd += " --plugstack-args";
    for (const auto& a : step.plugstack_args) cmd += " " + quoted(a);
  }
  cmd += " > " + quoted((work / "plan.txt").string());
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(json_file);
  const auto plan = nlohmann::json::parse(in);
  std::vector<Env> out;
  for (auto rank : step.local_ranks) {
    Env env;
    for (const auto& [name, value] : plan.at("environment").at(std::to_string(rank)).items()) {
      env[name] =
          value.is_object() ? value.at("content").get<std::string>() : value.get<std::string>();
    }
    out.push_back(std::move(env));
  }
  return out;
}

class PlanMatchesPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = std::filesystem::temp_directory_path() /
            ("dtrain-plan-vs-plugin-" + std::to_string(getpid()));
    std::filesystem::create_directories(work_);
  }
  void TearDown() override { std::filesystem::remove_all(work_); }

  void expect_same(const Step& step) {
    const auto plugin = plugin_environments(step);
    const auto plan = plan_environments(step, work_);
    ASSERT_EQ(plugin.size(), plan.size());
    for (std::size_t local = 0; local < plugin.size(); ++local) {
      EXPECT_FALSE(plugin[local].empty());
      for (const auto& [name, value] : plugin[local]) {
        const auto it = plan[local].find(name);
        if (it == plan[local].end()) {
          ADD_FAILURE() << "local task " << local << ": the plugin exports " << name
                        << " but dtrain-plan does not";
        } else {
          EXPECT_EQ(it->second, value) << "local task " << local << ": " << name;
        }
      }
      for (const auto& [name, value] : plan[local]) {
        EXPECT_TRUE(plugin[local].count(name))
            << "local task " << local << ": dtrain-plan prints " << name << "=" << value
            << " but the plugin does not export it";
      }
    }
  }

  std::filesystem::path work_;
};

// node2 of `srun -N4 -n8`: 4,2,1(x2), so this node runs global ranks 4 and 5.
Step node2_of_uneven_step(std::vector<std::string> args) {
  return {"node[1-4]", "4,2,1(x2)", 4, 8, 1, {4, 5}, std::move(args), ""};
}

}  // namespace

TEST_F(PlanMatchesPlugin, WithoutBinding) {
  expect_same(node2_of_uneven_step({"address=name", "topology=none"}));
}

TEST_F(PlanMatchesPlugin, WithGpuBindingFromASiteTopology) {
  expect_same(node2_of_uneven_step({"address=name", "topology=" DTRAIN_FIXTURES "/dgx-h100.xml"}));
  EXPECT_EQ(fake().job_env["FLAGS_selected_gpus"], "0,1,2,3");
}

TEST_F(PlanMatchesPlugin, WithOneFrameworkOnNodeOne) {
  auto step = node2_of_uneven_step(
      {"address=name", "ports=30000-32047", "topology=" DTRAIN_FIXTURES "/dgx-h100.xml"});
  step.node = 0;
  step.local_ranks = {0, 1, 2, 3};
  step.option = "paddle";
  expect_same(step);
}

TEST_F(PlanMatchesPlugin, WithValuesInMemoryFiles) {
  // 1000 ranks with 200-character names: the endpoint lists and TF_CONFIG go to memory files.
  Step step{std::string(200, 'n') + "[1-2]",
            "2,998",
            2,
            1000,
            0,
            {0, 1},
            // 998 tasks on a node need 999 ports: the widest range holds 64 blocks of that.
            {"address=name", "topology=none", "ports=1024-65535", "port_block=999"},
            ""};
  expect_same(step);
  EXPECT_NE(plugin_environments(step)[1].at("TF_CONFIG_FILE").find(R"("index":1})"),
            std::string::npos);
}
