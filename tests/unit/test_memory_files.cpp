// SPDX-License-Identifier: Apache-2.0
// Memory files (core/memory_file.hpp): how they are named, and that every reader (the core's,
// the bootstrap's, the Python module src/python/dtrain_env.py) notices a path that reaches
// another step's file, another file at the same number, or nothing; and what the plugin exports
// and removes, driven through the spank_* fake.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include <slurm/slurm.h>

#include "bootstrap/environment.hpp"
#include "core/error.hpp"
#include "core/memory_file.hpp"
#include "core/memory_file_io.hpp"
#include "spank/state.hpp"
#include "spank_fake.hpp"

using dtrain::testing::fake;
using dtrain::testing::handle;
using namespace dtrain::core;
using Vars = std::map<std::string, std::string>;

namespace {

EnvLookup lookup_in(const Vars& vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const dtrain::Error& e) {
    return e.what();
  }
  return "(no error)";
}

int descriptor_of(const std::string& path) {
  return std::stoi(path.substr(path.rfind('/') + 1));
}

// A process that runs `setup` and then waits until the test ends it: the holder of a memory
// file whose /proc/<pid>/fd entry a reader may reach.
class Holder {
 public:
  explicit Holder(const std::function<void()>& setup) {
    int ready[2];
    if (pipe(ready) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      close(ready[0]);
      setup();
      if (write(ready[1], "x", 1) != 1) _exit(1);
      for (;;) pause();
    }
    close(ready[1]);
    char byte = 0;
    if (read(ready[0], &byte, 1) != 1) throw std::runtime_error("the holder did not start");
    close(ready[0]);
  }
  Holder(const Holder&) = delete;
  Holder& operator=(const Holder&) = delete;
  ~Holder() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

struct Run {
  int status = -1;  // exit status, or -1 when the program did not exit normally
  std::string output;
};

// Runs argv with exactly `env`, stdout and stderr together; the memory files of this process
// are inherited, as a task's program inherits the task's.
Run run(const std::vector<std::string>& argv, const Vars& env) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  std::vector<std::string> entries;
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  std::vector<char*> envp, args;
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(out[1], 2);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(out[1]);
  Run result;
  char buffer[4096];
  for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) > 0;) result.output.append(buffer, n);
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.status = WEXITSTATUS(status);
  return result;
}

Run python(const std::string& code, Vars env, std::vector<std::string> prefix = {}) {
  env["PYTHONPATH"] = DTRAIN_PYTHON_MODULE_DIR;
  env["PATH"] = "/usr/bin:/bin";
  prefix.insert(prefix.end(), {"/usr/bin/python3", "-c", code});
  return run(prefix, env);
}

// Whether this machine lets the test start a PID namespace with its own /proc (root, or
// unprivileged user namespaces); the reason when not.
std::string pid_namespace_unavailable() {
  static const std::string reason = [] {
    if (access("/usr/bin/unshare", X_OK) != 0) return std::string("no /usr/bin/unshare");
    const auto probe = run({"/usr/bin/unshare", "--pid", "--fork", "--mount-proc", "/bin/true"},
                           {{"PATH", "/usr/bin:/bin"}});
    return probe.status == 0 ? std::string()
                             : "unshare --pid --fork --mount-proc failed: " + probe.output;
  }();
  return reason;
}

const std::vector<std::string> kUnshare = {"/usr/bin/unshare", "--pid", "--fork", "--mount-proc"};

// The variables a task of job 501, step 2, rank 7 gets for TF_CONFIG in a memory file.
Vars task_vars(const std::string& path, const std::string& value) {
  return {{"TF_CONFIG_FILE", path},
          {"TF_CONFIG_HASH", value_hash(value)},
          {"SLURM_JOB_ID", "501"},
          {"SLURM_STEP_ID", "2"},
          {"SLURM_PROCID", "7"}};
}

const MemoryFileOwner kOwner{501, 2, 7};

std::string tf_config_value() {
  return R"({"cluster":{"worker":[")" + std::string(140000, 'w') +
         R"(:1"]},"task":{"type":"worker","index":7}})";
}

}  // namespace

TEST(MemoryFileLabel, NamesTheTaskAndTheValues) {
  EXPECT_EQ(memory_file_label({12, 3, 45}, {"TF_CONFIG"}), "dtrain:12.3:rank45:TF_CONFIG");
  const auto label =
      memory_file_label({4294967295u, 0, 100000}, {"DTRAIN_ENDPOINTS", "PADDLE_TRAINER_ENDPOINTS"});
  const auto parsed = parse_memory_file_link("/memfd:" + label + " (deleted)");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->owner, (MemoryFileOwner{4294967295u, 0, 100000}));
  EXPECT_EQ(parsed->names,
            (std::vector<std::string>{"DTRAIN_ENDPOINTS", "PADDLE_TRAINER_ENDPOINTS"}));
  // Nothing else is read as one: another program's memfd, files, pipes, sockets, malformed ids.
  for (const char* other :
       {"/memfd:dtrain:12.3:rank45:TF_CONFIG", "/memfd:other:12.3:rank45:TF_CONFIG (deleted)",
        "/tmp/x", "pipe:[4242]", "socket:[17]", "/memfd:dtrain:12:rank45:TF_CONFIG (deleted)",
        "/memfd:dtrain:12.3:rank:TF_CONFIG (deleted)",
        "/memfd:dtrain:12.3:rank4294967296:TF_CONFIG (deleted)",
        "/memfd:dtrain:12.3:rank45: (deleted)", "/memfd:dtrain:12.3:rank45:TF CONFIG (deleted)"}) {
    EXPECT_FALSE(parse_memory_file_link(other)) << other;
  }
  EXPECT_THROW(memory_file_label({1, 2, 3}, {}), dtrain::Error);
  EXPECT_THROW(memory_file_label({1, 2, 3}, {"A=B"}), dtrain::Error);
  EXPECT_THROW(memory_file_label({1, 2, 3}, {std::string(240, 'A')}), dtrain::Error);
}

TEST(MemoryFileLabel, PathsAreThisProcesssDescriptors) {
  EXPECT_EQ(memory_file_path(512), "/proc/self/fd/512");
  EXPECT_EQ(memory_file_descriptor("/proc/self/fd/512"), 512);
  for (const char* other : {"/proc/123/fd/512", "/proc/self/fd/", "/proc/self/fd/5x",
                            "/tmp/endpoints", "/proc/self/fd/99999999999"}) {
    EXPECT_FALSE(memory_file_descriptor(other)) << other;
  }
}

TEST(MemoryFileExpectation, NamesWhatIsMissing) {
  EXPECT_FALSE(memory_file_expectation("TF_CONFIG", lookup_in({})));
  auto vars = task_vars("/proc/self/fd/512", "x");
  vars["SLURM_TASK_PID"] = "4242";
  const auto expected = memory_file_expectation("TF_CONFIG", lookup_in(vars));
  ASSERT_TRUE(expected);
  EXPECT_EQ(expected->descriptor, 512);
  EXPECT_EQ(expected->owner, kOwner);
  EXPECT_EQ(memory_file_places(*expected, 1),
            (std::vector<std::string>{"/proc/self/fd/512", "/proc/4242/fd/512"}));
  EXPECT_EQ(memory_file_places(*expected, 4242), (std::vector<std::string>{"/proc/self/fd/512"}));

  auto bad = vars;
  bad["TF_CONFIG_FILE"] = "/tmp/tf_config";
  EXPECT_NE(error_of([&] {
              memory_file_expectation("TF_CONFIG", lookup_in(bad));
            }).find("TF_CONFIG_FILE='/tmp/tf_config' is not a memory file of the plugin"),
            std::string::npos);
  bad = vars;
  bad.erase("TF_CONFIG_HASH");
  EXPECT_NE(error_of([&] {
              memory_file_expectation("TF_CONFIG", lookup_in(bad));
            }).find("TF_CONFIG_HASH is not set"),
            std::string::npos);
  bad["TF_CONFIG_HASH"] = "12345";
  EXPECT_NE(error_of([&] {
              memory_file_expectation("TF_CONFIG", lookup_in(bad));
            }).find("is not 16 hex digits"),
            std::string::npos);
  bad = vars;
  bad.erase("SLURM_STEP_ID");
  EXPECT_NE(error_of([&] {
              memory_file_expectation("TF_CONFIG", lookup_in(bad));
            }).find("SLURM_STEP_ID is not set, so TF_CONFIG_FILE cannot be checked"),
            std::string::npos);
}

TEST(MemoryFileRead, TheTaskReadsItsOwnFile) {
  const auto value = tf_config_value();
  const std::vector<EnvVar> vars = {{"TF_CONFIG_FILE", value, false, true}};
  const auto path = export_memory_files(kOwner, vars)[0];
  EXPECT_EQ(read_memory_file("TF_CONFIG", lookup_in(task_vars(path, value))), value);
  // Another value's variables, or another rank's, do not accept this file.
  auto other_rank = task_vars(path, value);
  other_rank["SLURM_PROCID"] = "8";
  EXPECT_NE(error_of([&] { read_memory_file("TF_CONFIG", lookup_in(other_rank)); })
                .find("is the memory file of job 501 step 2 rank 7, not of this task (job 501 "
                      "step 2 rank 8)"),
            std::string::npos);
  Vars as_list = {{"DTRAIN_ENDPOINTS_FILE", path}, {"DTRAIN_ENDPOINTS_HASH", value_hash(value)}};
  as_list.insert({{"SLURM_JOB_ID", "501"}, {"SLURM_STEP_ID", "2"}, {"SLURM_PROCID", "7"}});
  EXPECT_NE(error_of([&] {
              read_memory_file("DTRAIN_ENDPOINTS", lookup_in(as_list));
            }).find("holds another value, not DTRAIN_ENDPOINTS"),
            std::string::npos);
  close(descriptor_of(path));
}

// The reported failure: a wrapper backgrounds the program and exits, the task's PID is reused
// by another step's task, and /proc/<pid>/fd/N (here the fallback through SLURM_TASK_PID) leads
// to that task's file at the same number.
TEST(MemoryFileRead, AnotherStepsFileThroughAReusedPidIsNoticed) {
  const auto value = tf_config_value();
  const int number = 700;
  const std::string other_value = R"({"cluster":{"worker":["other:1"]},"task":{"index":7}})";
  Holder other_step([&] {
    const int fd = create_memory_file(memory_file_label({501, 9, 7}, {"TF_CONFIG"}), other_value);
    dup2(fd, number);
  });
  auto vars = task_vars(memory_file_path(number), value);  // nothing at 700 here
  vars["SLURM_TASK_PID"] = std::to_string(other_step.pid());
  const auto error = error_of([&] { read_memory_file("TF_CONFIG", lookup_in(vars)); });
  EXPECT_NE(error.find("/proc/self/fd/700: No such file or directory; /proc/" +
                       std::to_string(other_step.pid()) +
                       "/fd/700 (/memfd:dtrain:501.9:rank7:TF_CONFIG (deleted)) is the memory "
                       "file of job 501 step 9 rank 7, not of this task (job 501 step 2 rank 7): "
                       "the path reached another process"),
            std::string::npos)
      << error;
  // The same through the bootstrap, for the endpoint list.
  Holder other_list([&] {
    const int fd =
        create_memory_file(memory_file_label({501, 9, 7}, {"DTRAIN_ENDPOINTS"}), "h:1,h:2");
    dup2(fd, number);
  });
  const Vars list_vars = {{"DTRAIN_RANK", "1"},
                          {"DTRAIN_WORLD_SIZE", "2"},
                          {"DTRAIN_LOCAL_RANK", "1"},
                          {"DTRAIN_LOCAL_WORLD_SIZE", "2"},
                          {"DTRAIN_NODE_RANK", "0"},
                          {"DTRAIN_NNODES", "1"},
                          {"DTRAIN_CURRENT_ENDPOINT", "h:2"},
                          {"DTRAIN_ENDPOINTS_FILE", memory_file_path(number)},
                          {"DTRAIN_ENDPOINTS_HASH", value_hash("h:1,h:2")},
                          {"SLURM_JOB_ID", "501"},
                          {"SLURM_STEP_ID", "2"},
                          {"SLURM_PROCID", "7"},
                          {"SLURM_TASK_PID", std::to_string(other_list.pid())}};
  const auto read_file = [](const std::string& path) -> std::string {
    throw dtrain::Error(dtrain::ErrorKind::kInternal, "read " + path + " as a plain file");
  };
  EXPECT_NE(error_of([&] {
              dtrain::bootstrap::read_dtrain_env(lookup_in(list_vars), read_file);
            }).find("is the memory file of job 501 step 9 rank 7, not of this task"),
            std::string::npos);
}

// The reported failure: the program closes its inherited descriptors and opens files, one of
// them at the memory file's number.
TEST(MemoryFileRead, AnotherFileAtTheSameNumberIsNoticed) {
  const auto value = tf_config_value();
  const auto path = export_memory_files(kOwner, {{"TF_CONFIG_FILE", value, false, true}})[0];
  const int number = descriptor_of(path);
  auto vars = task_vars(path, value);
  // The task keeps its file while its child (this process from here on) loses it.
  Holder task([] {});
  close(number);
  const int unrelated = open("/proc/self/status", O_RDONLY);
  ASSERT_GE(unrelated, 0);
  ASSERT_EQ(dup2(unrelated, number), number);
  close(unrelated);
  const auto error = error_of([&] { read_memory_file("TF_CONFIG", lookup_in(vars)); });
  EXPECT_NE(error.find(path + " (/proc/"), std::string::npos) << error;
  EXPECT_NE(error.find("/status) is not a memory file of dtrain"), std::string::npos) << error;
  // Through the task's own /proc entry, while the task lives, the child finds the real file.
  vars["SLURM_TASK_PID"] = std::to_string(task.pid());
  EXPECT_EQ(read_memory_file("TF_CONFIG", lookup_in(vars)), value);
  close(number);
}

TEST(MemoryFileRead, ChangedOrUnsealedContentIsNoticed) {
  const auto value = tf_config_value();
  const auto path = export_memory_files(kOwner, {{"TF_CONFIG_FILE", value, false, true}})[0];
  auto vars = task_vars(path, value);
  vars["TF_CONFIG_HASH"] = value_hash(value + " ");
  EXPECT_NE(error_of([&] { read_memory_file("TF_CONFIG", lookup_in(vars)); })
                .find("has hash " + value_hash(value) +
                      ", not TF_CONFIG_HASH=" + value_hash(value + " ") +
                      ": its content is not the value the plugin exported"),
            std::string::npos);
  close(descriptor_of(path));
  // The right label without seals: anyone holding it could have rewritten it.
  const int unsealed = memfd_create(memory_file_label(kOwner, {"TF_CONFIG"}).c_str(), 0);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(write(unsealed, value.data(), value.size()), static_cast<ssize_t>(value.size()));
  EXPECT_NE(error_of([&] {
              read_memory_file("TF_CONFIG",
                               lookup_in(task_vars(memory_file_path(unsealed), value)));
            }).find("is not sealed against changes"),
            std::string::npos);
  close(unsealed);
}

TEST(MemoryFileRead, TheBootstrapPrefersTheFileToAnInheritedList) {
  const std::string list = "h1:20000,h1:20001,h2:20000";
  const auto path =
      export_memory_files({501, 2, 1}, {{"DTRAIN_ENDPOINTS_FILE", list, false, true}})[0];
  const Vars vars = {{"DTRAIN_RANK", "1"},
                     {"DTRAIN_WORLD_SIZE", "3"},
                     {"DTRAIN_LOCAL_RANK", "1"},
                     {"DTRAIN_LOCAL_WORLD_SIZE", "2"},
                     {"DTRAIN_NODE_RANK", "0"},
                     {"DTRAIN_NNODES", "2"},
                     {"DTRAIN_CURRENT_ENDPOINT", "h1:20001"},
                     {"DTRAIN_ENDPOINTS", "old:1,old:2,old:3"},  // a batch script's
                     {"DTRAIN_ENDPOINTS_FILE", path},
                     {"DTRAIN_ENDPOINTS_HASH", value_hash(list)},
                     {"SLURM_JOB_ID", "501"},
                     {"SLURM_STEP_ID", "2"},
                     {"SLURM_PROCID", "1"}};
  const auto env = dtrain::bootstrap::read_dtrain_env(
      lookup_in(vars), [](const std::string& p) -> std::string { return "unexpected " + p; });
  EXPECT_EQ(env.endpoints, list);
  EXPECT_EQ(env.endpoints_source, "DTRAIN_ENDPOINTS_FILE=" + path);
  EXPECT_TRUE(dtrain::bootstrap::check_env_locally(env).empty());
  close(descriptor_of(path));
}

// The plugin's side, through the spank_* fake, and the Python module reading what it made.
class MemoryFilesOfAStep : public ::testing::Test {
 protected:
  void SetUp() override {
    dtrain::testing::reset_fake();
    dtrain::spank::state() = dtrain::spank::PluginState{};
    dtrain::spank::state().end_task = [](int) {};
  }
  void TearDown() override {
    for (const int fd : files_) close(fd);
  }

  // Local task 1 (rank 1) of a 1000-rank step of job 501, step 2, whose 200-character node names
  // put the endpoint lists and TF_CONFIG past execve's limit. `inherited` is what the job had.
  Vars task_one(const Vars& inherited) {
    fake().context = S_CTX_REMOTE;
    fake().items = {{S_JOB_ID, 501},
                    {S_JOB_STEPID, 2},
                    {S_JOB_NODEID, 0},
                    {S_JOB_NNODES, 2},
                    {S_JOB_TOTAL_TASK_COUNT, 1000},
                    {S_JOB_LOCAL_TASK_COUNT, 2}};
    fake().local_to_global = {0, 1};
    fake().job_env = {{"SLURM_STEP_NODELIST", std::string(200, 'n') + "[1-2]"},
                      {"SLURM_STEP_TASKS_PER_NODE", "2,998"},
                      {"SLURM_DISTRIBUTION", "block"},
                      {"SLURM_JOB_ID", "501"},
                      {"SLURM_STEP_ID", "2"},
                      {"SLURM_PROCID", "1"}};
    for (const auto& [name, value] : inherited) fake().job_env[name] = value;
    std::vector<std::string> args = {"address=name", "topology=none", "ports=1024-65535",
                                     "port_block=999"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    EXPECT_EQ(slurm_spank_init(handle(), static_cast<int>(argv.size()), argv.data()), 0);
    EXPECT_EQ(fake().options.at(0)->cb(fake().options[0]->val, nullptr, 1), 0);
    EXPECT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
    fake().task_id = 1;
    fake().items[S_TASK_GLOBAL_ID] = 1;
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(slurm_spank_task_init(handle(), 0, nullptr), 0)
        << (fake().errors.empty() ? "" : fake().errors[0]);
    ::testing::internal::GetCapturedStderr();
    Vars env(fake().job_env.begin(), fake().job_env.end());
    for (const auto& [name, value] : env) {
      if (name.ends_with("_FILE")) files_.insert(descriptor_of(value));
    }
    return env;
  }

  std::set<int> files_;
};

TEST_F(MemoryFilesOfAStep, ThePluginLabelsHashesAndRemovesTheInheritedForms) {
  const auto env = task_one({{"TF_CONFIG", R"({"cluster":{"worker":["batch:1"]}})"},
                             {"PADDLE_TRAINER_ENDPOINTS", "batch:1"},
                             {"TF_CONFIG_HASH", "0123456789abcdef"}});
  EXPECT_EQ(env.count("TF_CONFIG"), 0u);
  EXPECT_EQ(env.count("PADDLE_TRAINER_ENDPOINTS"), 0u);
  EXPECT_EQ(env.count("DTRAIN_ENDPOINTS"), 0u);
  ASSERT_EQ(env.count("TF_CONFIG_FILE"), 1u);
  EXPECT_EQ(env.at("TF_CONFIG_FILE").rfind("/proc/self/fd/", 0), 0u);
  EXPECT_EQ(env.at("PADDLE_TRAINER_ENDPOINTS_FILE"), env.at("DTRAIN_ENDPOINTS_FILE"));
  EXPECT_EQ(env.at("PADDLE_TRAINER_ENDPOINTS_HASH"), env.at("DTRAIN_ENDPOINTS_HASH"));
  EXPECT_NE(env.at("TF_CONFIG_HASH"), "0123456789abcdef");
  const auto lookup = lookup_in(env);
  for (const char* name : {"DTRAIN_ENDPOINTS", "PADDLE_TRAINER_ENDPOINTS", "TF_CONFIG"}) {
    const auto value = read_memory_file(name, lookup);
    ASSERT_TRUE(value) << name;
    EXPECT_GT(value->size(), 131072u) << name;
  }
  EXPECT_NE(read_memory_file("TF_CONFIG", lookup)->find(R"("task":{"type":"worker","index":1})"),
            std::string::npos);
  char target[256] = {};
  ASSERT_GT(readlink(env.at("TF_CONFIG_FILE").c_str(), target, sizeof target - 1), 0);
  EXPECT_STREQ(target, "/memfd:dtrain:501.2:rank1:TF_CONFIG (deleted)");
}

TEST_F(MemoryFilesOfAStep, AStepWithoutFilesRemovesAnOuterStepsFileForms) {
  fake().context = S_CTX_REMOTE;
  fake().items = {{S_JOB_ID, 501},   {S_JOB_STEPID, 3},           {S_JOB_NODEID, 0},
                  {S_JOB_NNODES, 2}, {S_JOB_TOTAL_TASK_COUNT, 2}, {S_JOB_LOCAL_TASK_COUNT, 1}};
  fake().local_to_global = {0};
  fake().job_env = {{"SLURM_STEP_NODELIST", "node[1-2]"},
                    {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
                    {"TF_CONFIG_FILE", "/proc/self/fd/512"},
                    {"TF_CONFIG_HASH", "0123456789abcdef"},
                    {"DTRAIN_ENDPOINTS_FILE", "/proc/self/fd/513"}};
  std::vector<std::string> args = {"address=name", "topology=none"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ASSERT_EQ(slurm_spank_init(handle(), static_cast<int>(argv.size()), argv.data()), 0);
  ASSERT_EQ(fake().options.at(0)->cb(fake().options[0]->val, nullptr, 1), 0);
  ASSERT_EQ(slurm_spank_user_init(handle(), 0, nullptr), 0);
  fake().task_id = 0;
  fake().items[S_TASK_GLOBAL_ID] = 0;
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(slurm_spank_task_init(handle(), 0, nullptr), 0);
  ::testing::internal::GetCapturedStderr();
  for (const char* gone : {"TF_CONFIG_FILE", "TF_CONFIG_HASH", "DTRAIN_ENDPOINTS_FILE"}) {
    EXPECT_EQ(fake().job_env.count(gone), 0u) << gone;
  }
  EXPECT_EQ(fake().job_env.count("TF_CONFIG"), 1u);
  EXPECT_EQ(fake().job_env.count("DTRAIN_ENDPOINTS"), 1u);
}

// dtrain_env.load() in the task's program: every value, checked, in os.environ for this process
// only, so that what it starts with exec does not fail with E2BIG.
TEST_F(MemoryFilesOfAStep, ThePythonModuleLoadsTheValues) {
  const auto env = task_one({});
  const auto tf_config = *read_memory_file("TF_CONFIG", lookup_in(env));
  const auto result = python(
      "import json, os, subprocess, dtrain_env\n"
      "assert 'TF_CONFIG' not in os.environ\n"
      "loaded = dtrain_env.load()\n"
      "config = json.loads(os.environ['TF_CONFIG'])\n"
      "workers = config['cluster']['worker']\n"
      "eps = os.environ['PADDLE_TRAINER_ENDPOINTS'].split(',')\n"
      "assert eps == os.environ['DTRAIN_ENDPOINTS'].split(',')\n"
      "assert workers[1] == eps[1] == os.environ['DTRAIN_CURRENT_ENDPOINT']\n"
      "subprocess.run(['/bin/true'], check=True)\n"
      "child = subprocess.run(['/bin/sh', '-c', 'echo ${TF_CONFIG:-unset}'], check=True,\n"
      "                       capture_output=True, text=True).stdout.strip()\n"
      "print(','.join(loaded), len(workers), config['task']['index'], len(os.environ['TF_CONFIG']),"
      " child)\n",
      env);
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_EQ(result.output, "DTRAIN_ENDPOINTS,PADDLE_TRAINER_ENDPOINTS,TF_CONFIG 1000 1 " +
                               std::to_string(tf_config.size()) + " unset\n");
}

TEST_F(MemoryFilesOfAStep, ThePythonModuleNoticesAnotherFileAtTheNumber) {
  auto env = task_one({});
  const std::string code =
      "import os, dtrain_env\n"
      "n = int(os.environ['TF_CONFIG_FILE'].rsplit('/', 1)[1])\n"
      "os.close(n)\n"
      "other = os.open('/proc/self/status', os.O_RDONLY)\n"
      "os.dup2(other, n)\n"
      "try:\n"
      "    dtrain_env.load()\n"
      "    print('loaded', len(os.environ['TF_CONFIG']))\n"
      "except dtrain_env.MemoryFileError as e:\n"
      "    print(e)\n";
  auto result = python(code, env);
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("dtrain: cannot read TF_CONFIG from its memory file: " +
                               env.at("TF_CONFIG_FILE") + " (/proc/"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("/status) is not a memory file of dtrain"), std::string::npos)
      << result.output;
  // While the task (this test) lives, the child reads the task's file through SLURM_TASK_PID.
  env["SLURM_TASK_PID"] = std::to_string(getpid());
  result = python(code, env);
  EXPECT_EQ(result.output.rfind("loaded ", 0), 0u) << result.output;
}

TEST_F(MemoryFilesOfAStep, ThePythonModuleNoticesAnotherStepsFileThroughAReusedPid) {
  auto env = task_one({});
  const int number = 900;
  Holder other_step([&] {
    const int fd = create_memory_file(memory_file_label({501, 1, 1}, {"TF_CONFIG"}), "{}");
    dup2(fd, number);
  });
  env["TF_CONFIG_FILE"] = memory_file_path(number);
  env["SLURM_TASK_PID"] = std::to_string(other_step.pid());
  const auto result = python(
      "import dtrain_env\n"
      "try:\n"
      "    dtrain_env.read('TF_CONFIG')\n"
      "except dtrain_env.MemoryFileError as e:\n"
      "    print(e)\n",
      env);
  EXPECT_NE(result.output.find("/proc/self/fd/900: No such file or directory; /proc/" +
                               std::to_string(other_step.pid()) +
                               "/fd/900 (/memfd:dtrain:501.1:rank1:TF_CONFIG (deleted)) is the "
                               "memory file of job 501 step 1 rank 1, not of this task (job 501 "
                               "step 2 rank 1): the path reached another process"),
            std::string::npos)
      << result.output;
}

// In a PID namespace with its own /proc (Apptainer --pid, Podman, Slurm's OCI containers) the
// task's /proc/<pid> names no process or another one; /proc/self/fd/N is still the file.
TEST_F(MemoryFilesOfAStep, ThePythonModuleReadsInANewPidNamespace) {
  if (const auto reason = pid_namespace_unavailable(); !reason.empty()) GTEST_SKIP() << reason;
  auto env = task_one({});
  const auto tf_config = *read_memory_file("TF_CONFIG", lookup_in(env));
  const std::string outer = "/proc/" + std::to_string(getpid()) + "/fd/" +
                            std::to_string(descriptor_of(env.at("TF_CONFIG_FILE")));
  const auto result = python(
      "import os, dtrain_env\n"
      "try:\n"
      "    open('" +
          outer +
          "').close()\n"
          "    print('outer path opened')\n"
          "except OSError as e:\n"
          "    print('outer path:', e.strerror)\n"
          "print('pid', os.getpid(), 'read', len(dtrain_env.read('TF_CONFIG')))\n",
      env, kUnshare);
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("outer path: No such file or directory"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("pid 1 read " + std::to_string(tf_config.size())), std::string::npos)
      << result.output;
}
