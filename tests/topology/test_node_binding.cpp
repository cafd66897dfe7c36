// SPDX-License-Identifier: Apache-2.0
// Which GPUs a step's tasks are bound to, from the GPU variables Slurm (gres) or the user left.

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "topology/load_io.hpp"
#include "topology/node_binding.hpp"
#include "topology_test_support.hpp"

namespace dtrain::topology {
namespace {

using testing::fixture;

const NodeTopology& dgx() {
  static const NodeTopology topology = load_topology(fixture("dgx-h100.xml"));
  return topology;
}

std::optional<std::string> value_of(const core::TaskBindingEnv& task, const std::string& name) {
  for (const auto& var : task.env) {
    if (var.name == name) return var.value;
  }
  return std::nullopt;
}

bool keeps_user_value(const core::TaskBindingEnv& task, const std::string& name) {
  for (const auto& var : task.env) {
    if (var.name == name) return var.keep_user_value;
  }
  return false;
}

// Every task is bound to CPUs and to no GPU or NIC; one note says why, no warning.
void expect_cpu_only(const NodeBinding& b, const std::string& note_part) {
  ASSERT_FALSE(b.env.tasks.empty());
  for (const auto& task : b.env.tasks) {
    for (const char* name : {"CUDA_VISIBLE_DEVICES", "DTRAIN_GPU_BUS_IDS", "NCCL_IB_HCA",
                             "DTRAIN_NIC", "UCX_NET_DEVICES", "CUDA_DEVICE_ORDER"}) {
      EXPECT_EQ(value_of(task, name), std::nullopt) << name;
    }
    EXPECT_NE(value_of(task, "DTRAIN_CPU_LIST"), std::nullopt);
    EXPECT_EQ(task.gpu_count, 0u);
  }
  ASSERT_EQ(b.notes.size(), 1u);
  EXPECT_NE(b.notes[0].find(note_part), std::string::npos) << b.notes[0];
  EXPECT_TRUE(b.warnings.empty());
}

TEST(NodeBinding, SlurmStepGpusAreTheOnlyOnesBoundAndSlurmsValueIsReplaced) {
  StepGpuVariables gpus;
  gpus.step_gpus = "2,3";
  gpus.job_gpus = "0,1,2,3";
  gpus.cuda_visible_devices = "0,1";  // ConstrainDevices: renumbered from 0
  const NodeBinding b = bind_node(dgx(), 2, gpus);
  ASSERT_EQ(b.env.tasks.size(), 2u);
  EXPECT_EQ(value_of(b.env.tasks[0], "CUDA_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(value_of(b.env.tasks[1], "CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_EQ(value_of(b.env.tasks[0], "DTRAIN_GPU_BUS_IDS"), "0000:52:00.0");
  EXPECT_FALSE(keeps_user_value(b.env.tasks[0], "CUDA_VISIBLE_DEVICES"));
  EXPECT_TRUE(b.notes.empty());
}

TEST(NodeBinding, MigAndUuidValuesFromSlurmAreKeptAndOnlyCpusAreBound) {
  for (const char* visible :
       {"MIG-4f2a8c1e-1a2b-5c3d-9e8f-0123456789ab",
        "MIG-GPU-8f3c0d2e-76a1-4b5c-9d3e-2f1a0b9c8d7e/1/"
        "0,MIG-GPU-8f3c0d2e-76a1-4b5c-9d3e-2f1a0b9c8d7e/2/0",
        "GPU-8f3c0d2e-76a1-4b5c-9d3e-2f1a0b9c8d7e,GPU-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"}) {
    SCOPED_TRACE(visible);
    StepGpuVariables gpus;
    gpus.step_gpus = "0,1";
    gpus.job_gpus = "0,1";
    gpus.cuda_visible_devices = visible;
    const NodeBinding b = bind_node(dgx(), 2, gpus);
    expect_cpu_only(b, "kept as Slurm set it");
    // The tasks still have GPUs (Paddle then gets no gloo backend).
    EXPECT_TRUE(b.env.visible_devices_set);
    EXPECT_TRUE(b.env.gpus_left_as_named);
  }
}

TEST(NodeBinding, AStepWithoutGpusInAGpuJobGetsNoneOfTheJobsGpus) {
  // srun --gres=none inside a job with GPUs: Slurm leaves only SLURM_JOB_GPUS.
  StepGpuVariables gpus;
  gpus.job_gpus = "0,1";
  const NodeBinding b = bind_node(dgx(), 2, gpus);
  expect_cpu_only(b, "holds none");
  EXPECT_FALSE(b.env.gpus_left_as_named);
}

TEST(NodeBinding, GpusSlurmBindsNoGpuWithoutSlurmStepGpus) {
  StepGpuVariables gpus;
  gpus.slurm_only = true;
  expect_cpu_only(bind_node(dgx(), 2, gpus), "gpus=slurm");
  gpus.cuda_visible_devices = "4,5";  // a user's value does not give a step GPUs under gpus=slurm
  expect_cpu_only(bind_node(dgx(), 2, gpus), "gpus=slurm");
  gpus.step_gpus = "6,7";
  gpus.cuda_visible_devices = "6,7";
  const NodeBinding b = bind_node(dgx(), 2, gpus);
  EXPECT_EQ(value_of(b.env.tasks[1], "CUDA_VISIBLE_DEVICES"), "7");
}

TEST(NodeBinding, WithoutSlurmsVariablesTheUsersIndicesLimitTheGpus) {
  StepGpuVariables gpus;
  gpus.cuda_visible_devices = "4,5";
  const NodeBinding b = bind_node(dgx(), 2, gpus);
  EXPECT_EQ(value_of(b.env.tasks[0], "CUDA_VISIBLE_DEVICES"), "4");
  EXPECT_TRUE(keeps_user_value(b.env.tasks[0], "CUDA_VISIBLE_DEVICES"));
  EXPECT_TRUE(b.notes.empty());
  gpus.cuda_visible_devices = "MIG-4f2a8c1e-1a2b-5c3d-9e8f-0123456789ab";
  expect_cpu_only(bind_node(dgx(), 2, gpus), "does not name GPUs by index");
}

TEST(NodeBinding, WithoutAnyGpuVariableEveryGpuOfTheNodeIsTheSteps) {
  const NodeBinding b = bind_node(dgx(), 8, {});
  ASSERT_EQ(b.env.tasks.size(), 8u);
  EXPECT_EQ(value_of(b.env.tasks[7], "CUDA_VISIBLE_DEVICES"), "7");
  EXPECT_TRUE(b.notes.empty());
}

}  // namespace
}  // namespace dtrain::topology
