// SPDX-License-Identifier: Apache-2.0
// A node that refuses a step ends it on every node (task_exit cancels it), and the rule for
// a port of the step that the user's own process already holds: through the real SPANK callbacks
// and the spank_* fake.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <vector>

#include <slurm/slurm.h>

#include "core/config.hpp"
#include "core/net_io.hpp"
#include "core/ports.hpp"
#include "spank/state.hpp"
#include "spank_fake.hpp"
#include "spank_test.hpp"

using dtrain::testing::fake;
using dtrain::testing::handle;

namespace {

// A listener on 127.0.0.1:port of this process (the step's user, to the plugin), for its scope.
class Listener {
 public:
  explicit Listener(std::uint16_t port) : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
          listen(fd_, 1) == 0;
  }
  ~Listener() {
    if (fd_ >= 0) close(fd_);
  }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  bool ok() const { return ok_; }

 private:
  int fd_;
  bool ok_ = false;
};

class SpankRefusal : public dtrain::testing::SpankTest {
 protected:
  // Step 77.3 with two tasks on one node, localhost (127.0.0.1, which a one-node step may use).
  void one_node_step() {
    fake().context = S_CTX_REMOTE;
    fake().items = {{S_JOB_ID, 77},    {S_JOB_STEPID, 3},           {S_JOB_NODEID, 0},
                    {S_JOB_NNODES, 1}, {S_JOB_TOTAL_TASK_COUNT, 2}, {S_JOB_LOCAL_TASK_COUNT, 2}};
    fake().local_to_global = {0, 1};
    fake().job_env = {{"SLURM_STEP_NODELIST", "localhost"},
                      {"SLURM_STEP_TASKS_PER_NODE", "2"},
                      {"SLURM_DISTRIBUTION", "block"}};
  }

  // A ports= range of 32 rows of 65 below the ephemeral ports whose ports for step 77.3 (two
  // tasks) are all free here; its plugstack arguments.
  std::vector<std::string> free_ports() {
    for (std::uint32_t first = 24000; first < 30000; first += 2080) {
      const dtrain::core::PortRange range{static_cast<std::uint16_t>(first),
                                          static_cast<std::uint16_t>(first + 65 * 32 - 1)};
      ports_ = dtrain::core::plan_ports(range, 32, 77, 3, 2, "");
      bool free = !dtrain::core::port_in_use("127.0.0.1", ports_.master);
      for (auto p : ports_.endpoint_ports)
        free = free && !dtrain::core::port_in_use("127.0.0.1", p);
      if (free) {
        return {"ports=" + std::to_string(range.first) + "-" + std::to_string(range.last),
                "port_block=32"};
      }
    }
    ADD_FAILURE() << "no free ports for the test step";
    return {};
  }

  // init (plugstack arguments), --distributed-train[=frameworks], user_init.
  void start(std::vector<std::string> args, const char* frameworks) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    ASSERT_EQ(slurm_spank_init(handle(), static_cast<int>(argv.size()), argv.data()), 0);
    ASSERT_EQ(fake().options.at(0)->cb(fake().options[0]->val, frameworks, 1), 0);
    ASSERT_EQ(slurm_spank_init_post_opt(handle(), 0, nullptr), 0);
    ASSERT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  }

  // Both tasks ended: task_exit once per task, as slurmstepd calls it.
  void tasks_exit() {
    for (int local = 0; local < 2; ++local) {
      fake().task_id = local;
      EXPECT_EQ(slurm_spank_task_exit(handle(), 0, nullptr), 0);
    }
  }

  // task_init of local task 0 (global rank 0); what it printed on its stderr.
  std::string task0(int expected_rc) {
    fake().task_id = 0;
    fake().items[S_TASK_GLOBAL_ID] = 0;
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(slurm_spank_task_init(handle(), 0, nullptr), expected_rc);
    return ::testing::internal::GetCapturedStderr();
  }

  std::string errors() const {
    std::string all;
    for (const auto& e : fake().errors) all += e + "\n";
    return all;
  }

  dtrain::core::StepPorts ports_;
};

}  // namespace

// A refusal in user_init: the tasks stop before exec, and as they end slurmstepd (as root) asks
// slurmctld once to SIGKILL the step on every node.
TEST_F(SpankRefusal, ARefusingNodeCancelsTheStepOnceAfterSayingWhy) {
  one_node_step();
  start({"port_block=2", "address=name"}, nullptr);  // 2 tasks need 3 ports: refused
  ASSERT_NE(errors().find("port_block=2"), std::string::npos) << errors();
  EXPECT_NE(task0(-1).find("dtrain: error: the task stops before its program starts"),
            std::string::npos);
  EXPECT_EQ(ended_with(), 1);
  EXPECT_TRUE(fake().kill_requests.empty());
  tasks_exit();
  ASSERT_EQ(fake().kill_requests.size(), 1u);
  EXPECT_EQ(fake().kill_requests[0].job_id, 77u);
  EXPECT_EQ(fake().kill_requests[0].step_id, 3u);
  EXPECT_EQ(fake().kill_requests[0].signal, SIGKILL);
  // The reason first, then that the step ends everywhere.
  ASSERT_EQ(fake().errors.size(), 2u) << errors();
  EXPECT_EQ(fake().errors[1],
            "dtrain: step 77.3 ends on every node, since this node refused it (the reason is "
            "above)");
}

// Node 0 cancels without asking; a later node first asks whether the step is still there, so a
// step that every node refused costs slurmctld one fan-out, not one per node.
TEST_F(SpankRefusal, ALaterNodeDoesNotCancelAStepThatHasAlreadyEnded) {
  one_node_step();
  start({"port_block=2", "address=name"}, nullptr);
  tasks_exit();
  EXPECT_EQ(fake().step_queries, 0);  // node 0 asks nothing
  ASSERT_EQ(fake().kill_requests.size(), 1u);

  SetUp();
  one_node_step();
  fake().items[S_JOB_NODEID] = 3;
  fake().step_gone = true;
  start({"port_block=2", "address=name"}, nullptr);
  tasks_exit();
  EXPECT_EQ(fake().step_queries, 1);
  EXPECT_TRUE(fake().kill_requests.empty()) << errors();

  SetUp();
  one_node_step();
  fake().items[S_JOB_NODEID] = 3;
  start({"port_block=2", "address=name"}, nullptr);
  tasks_exit();
  EXPECT_EQ(fake().step_queries, 1);
  EXPECT_EQ(fake().kill_requests.size(), 1u);  // still running: this node's cancel ends it

  SetUp();
  one_node_step();
  fake().items[S_JOB_NODEID] = 3;
  fake().step_query_error = SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT;
  start({"port_block=2", "address=name"}, nullptr);
  tasks_exit();
  EXPECT_EQ(fake().kill_requests.size(), 1u);  // slurmctld cannot say: cancel all the same
}

TEST_F(SpankRefusal, AFailedCancelIsLoggedWithTheFixAndNeverThrows) {
  one_node_step();
  fake().kill_error = ESLURM_ACCESS_DENIED;
  start({"port_block=2", "address=name"}, nullptr);
  tasks_exit();
  EXPECT_EQ(fake().kill_requests.size(), 1u);
  EXPECT_NE(errors().find("dtrain: could not cancel step 77.3 ("), std::string::npos) << errors();
  EXPECT_NE(errors().find("Fix: scancel 77.3"), std::string::npos) << errors();
}

TEST_F(SpankRefusal, AStepThatStartsIsNeverCancelled) {
  one_node_step();
  start({"address=name"}, nullptr);
  tasks_exit();
  EXPECT_TRUE(fake().kill_requests.empty());
  EXPECT_EQ(errors(), "");
  // Without --distributed-train nothing is planned, so nothing is refused; under enable=always
  // a refused step without the option runs or not as plugstack.conf's optional or required
  // says, and is never cancelled.
  for (const char* enable : {"enable=option", "enable=always"}) {
    SetUp();
    one_node_step();
    std::vector<std::string> args{"port_block=2", "address=name", enable};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    ASSERT_EQ(slurm_spank_init(handle(), 3, argv.data()), 0);
    ASSERT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
    EXPECT_EQ(dtrain::spank::state().planning_error.empty(),
              enable == std::string("enable=option"));
    tasks_exit();
    EXPECT_TRUE(fake().kill_requests.empty()) << enable;
  }
}

namespace {

// srun -w gpu[1-2] -n4 : -w cpu1 -n1, step 4, seen from cpu1 (component 1, job 501). `leader`:
// component 0's job id as the environment names it; component 0's layout request fails with
// `layout_error` (0: it answers).
void het_step_on_cpu1(const char* leader, int layout_error) {
  fake().context = S_CTX_REMOTE;
  fake().items = {{S_JOB_ID, 501},   {S_JOB_STEPID, 4},           {S_JOB_NODEID, 0},
                  {S_JOB_NNODES, 1}, {S_JOB_TOTAL_TASK_COUNT, 1}, {S_JOB_LOCAL_TASK_COUNT, 1}};
  fake().local_to_global = {0};
  fake().job_env = {
      {"SLURM_STEP_NODELIST", "cpu1,gpu[1-2]"}, {"SLURM_STEP_TASKS_PER_NODE", "1,2(x2)"},
      {"SLURM_DISTRIBUTION", "block"},          {"SLURM_JOB_ID_PACK_GROUP_0", leader},
      {"SLURM_JOB_ID_PACK_GROUP_1", "501"},     {"SLURM_PACK_SIZE", "2"}};
  fake().step_layouts[std::stoul(leader)] = {{"gpu1", "gpu2"}, {{0, 1}, {2, 3}}, layout_error};
  fake().step_layouts[501] = {{"cpu1"}, {{0}}, 0};
}

}  // namespace

// A het step is named by component 0's job, so that slurmctld ends it in every component; that
// job id comes from slurmctld's record of this node's own job (het_job_id), never from the
// environment, which the user's launcher writes: the request runs as root.
TEST_F(SpankRefusal, AHetStepIsCancelledThroughComponentZeroAsSlurmctldNamesIt) {
  // Component 0's layout request failed: the step stops, and is still ended everywhere.
  het_step_on_cpu1("500", SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT);
  fake().het_job_ids[501] = 500;
  start({"address=name"}, nullptr);
  ASSERT_FALSE(dtrain::spank::state().planning_error.empty());
  fake().task_id = 0;
  EXPECT_EQ(slurm_spank_task_exit(handle(), 0, nullptr), 0);
  ASSERT_EQ(fake().kill_requests.size(), 1u) << errors();
  EXPECT_EQ(fake().kill_requests[0].job_id, 500u);
  EXPECT_EQ(fake().kill_requests[0].step_id, 4u);
  // With the layouts (gpu1 and gpu2 run 2 tasks each, more than port_block=2 allows): the same.
  SetUp();
  het_step_on_cpu1("500", 0);
  fake().het_job_ids[501] = 500;
  start({"address=name", "port_block=2"}, nullptr);
  ASSERT_TRUE(dtrain::spank::state().het.has_value()) << errors();
  ASSERT_FALSE(dtrain::spank::state().planning_error.empty());
  EXPECT_EQ(slurm_spank_task_exit(handle(), 0, nullptr), 0);
  ASSERT_EQ(fake().kill_requests.size(), 1u) << errors();
  EXPECT_EQ(fake().kill_requests[0].job_id, 500u);
  // An environment that names another user's job 700 as component 0, in a job slurmctld knows
  // as no het job: only this job's own step is cancelled.
  SetUp();
  het_step_on_cpu1("700", 0);
  start({"address=name", "port_block=2"}, nullptr);
  ASSERT_FALSE(dtrain::spank::state().planning_error.empty());
  EXPECT_EQ(slurm_spank_task_exit(handle(), 0, nullptr), 0);
  ASSERT_EQ(fake().kill_requests.size(), 1u) << errors();
  EXPECT_EQ(fake().kill_requests[0].job_id, 501u);
  // slurmctld cannot say: this job's own step.
  SetUp();
  het_step_on_cpu1("500", 0);
  fake().het_job_ids[501] = 500;
  fake().load_job_error = SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT;
  start({"address=name", "port_block=2"}, nullptr);
  EXPECT_EQ(slurm_spank_task_exit(handle(), 0, nullptr), 0);
  ASSERT_EQ(fake().kill_requests.size(), 1u) << errors();
  EXPECT_EQ(fake().kill_requests[0].job_id, 501u);
}

// The user's own process on an endpoint port: TensorFlow's workers and PaddlePaddle's trainers
// bind it, so a step that exports their names stops before the program, naming port and binders.
TEST_F(SpankRefusal, OwnHolderOfAnEndpointPortStopsAStepWithTensorFlowOrPaddle) {
  one_node_step();
  auto args = free_ports();
  ASSERT_FALSE(args.empty());
  Listener held(ports_.endpoint_ports[1]);
  ASSERT_TRUE(held.ok());
  start(args, "tf");
  EXPECT_NE(errors().find("port " + std::to_string(ports_.endpoint_ports[1]) +
                          " on localhost (127.0.0.1), the endpoint of local rank 1, is already in "
                          "use by another process of yours, and TensorFlow's worker server "
                          "(TF_CONFIG) binds it: the step stops here"),
            std::string::npos)
      << errors();
  EXPECT_NE(errors().find("ss -ltnp 'sport = :" + std::to_string(ports_.endpoint_ports[1])),
            std::string::npos);
  tasks_exit();
  EXPECT_EQ(fake().kill_requests.size(), 1u);
  task0(-1);
  EXPECT_EQ(ended_with(), 1);
}

// The same port in a step that exports only PyTorch's names, which never bind endpoint ports:
// a warning on local task 0's stderr, and the step runs.
TEST_F(SpankRefusal, OwnHolderOfAnEndpointPortOnlyWarnsAPyTorchStep) {
  one_node_step();
  auto args = free_ports();
  ASSERT_FALSE(args.empty());
  Listener held(ports_.endpoint_ports[1]);
  ASSERT_TRUE(held.ok());
  start(args, "torch");
  EXPECT_EQ(errors(), "");
  tasks_exit();
  EXPECT_TRUE(fake().kill_requests.empty());
  const auto said = task0(0);
  EXPECT_NE(said.find("dtrain: warning: port " + std::to_string(ports_.endpoint_ports[1]) +
                      " on localhost (127.0.0.1), the endpoint of local rank 1, is already in use "
                      "by another process of yours; no framework this step exports binds it"),
            std::string::npos)
      << said;
  EXPECT_EQ(ended_with(), -1);
}

// The master port on rank 0's node: PyTorch's and PaddlePaddle's TCPStore bind it there;
// TensorFlow does not.
TEST_F(SpankRefusal, OwnHolderOfTheMasterPortStopsAPyTorchStepOnly) {
  one_node_step();
  auto args = free_ports();
  ASSERT_FALSE(args.empty());
  Listener held(ports_.master);
  ASSERT_TRUE(held.ok());
  start(args, "torch");
  EXPECT_NE(errors().find("the master port (DTRAIN_MASTER_PORT), is already in use by another "
                          "process of yours, and PyTorch's TCPStore (MASTER_PORT) binds it"),
            std::string::npos)
      << errors();
  SetUp();
  one_node_step();
  start(args, "tf");
  EXPECT_EQ(errors(), "");
  EXPECT_NE(task0(0).find("the master port (DTRAIN_MASTER_PORT), is already in use by another "
                          "process of yours; no framework this step exports binds it"),
            std::string::npos);
}

TEST(PortBinders, NameWhatEachFrameworkBinds) {
  using dtrain::core::frameworks_binding;
  using dtrain::core::StepPortKind;
  const dtrain::core::FrameworkSet all;
  EXPECT_EQ(frameworks_binding(all, StepPortKind::kMaster),
            "PyTorch's TCPStore (MASTER_PORT) and PaddlePaddle's TCPStore (PADDLE_MASTER) and "
            "JAX's coordinator (JAX_COORDINATOR_ADDRESS)");
  EXPECT_EQ(frameworks_binding(all, StepPortKind::kEndpoint),
            "TensorFlow's worker server (TF_CONFIG) and PaddlePaddle's trainer "
            "(PADDLE_CURRENT_ENDPOINT)");
  EXPECT_EQ(frameworks_binding({true, false, false, true}, StepPortKind::kEndpoint), "");
  EXPECT_EQ(frameworks_binding({false, false, true, false}, StepPortKind::kMaster), "");
  EXPECT_EQ(frameworks_binding({false, true, false, false}, StepPortKind::kMaster),
            "PaddlePaddle's TCPStore (PADDLE_MASTER)");
  EXPECT_EQ(frameworks_binding({false, false, false, true}, StepPortKind::kMaster),
            "JAX's coordinator (JAX_COORDINATOR_ADDRESS)");
}
