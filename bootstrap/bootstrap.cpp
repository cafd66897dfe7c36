// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/bootstrap.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>

#include "bootstrap/agreement.hpp"
#include "bootstrap/deadline.hpp"
#include "bootstrap/endpoints.hpp"
#include "bootstrap/environment.hpp"
#include "bootstrap/event_tick.hpp"
#include "bootstrap/fault_hint.hpp"
#include "bootstrap/fingerprint.hpp"
#include "bootstrap/fingerprint_probe.hpp"
#include "bootstrap/heap.hpp"
#include "bootstrap/mpi_communicator.hpp"
#include "bootstrap/mpi_fabric.hpp"
#include "bootstrap/nccl_backend.hpp"
#include "bootstrap/peers.hpp"
#include "bootstrap/pmix_placement.hpp"
#include "bootstrap/preflight.hpp"
#include "bootstrap/preflight_report.hpp"
#include "core/error.hpp"

namespace dtrain::bootstrap {

namespace {

// The watchdog backs up the polled steps, which report more precisely, so it fires later.
constexpr std::chrono::seconds kWatchdogGrace{3};
// How long before the deadline rank 0 checks, while MPI_Init still waits, which ranks listen on
// their endpoints; well before any rank's watchdog ends it (kWatchdogGrace after the deadline).
constexpr std::chrono::milliseconds kAbsenceCheckLead{2000};
constexpr const char* kMpiInitPhase = "MPI_Init_thread";
// How long probes made right after MPI_Init retry a refused connect.
constexpr std::chrono::milliseconds kRefusedRetryWindow{250};

std::string this_hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

// Before MPI_Init only the launcher's variables say who we are.
std::string rank_hint() {
  for (const char* name : {"DTRAIN_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"}) {
    if (const char* value = std::getenv(name)) return value;
  }
  return "?";
}

int mpi_thread_level(ThreadLevel level) {
  switch (level) {
    case ThreadLevel::kSingle:
      return MPI_THREAD_SINGLE;
    case ThreadLevel::kFunneled:
      return MPI_THREAD_FUNNELED;
    case ThreadLevel::kSerialized:
      return MPI_THREAD_SERIALIZED;
    case ThreadLevel::kMultiple:
      return MPI_THREAD_MULTIPLE;
  }
  return MPI_THREAD_FUNNELED;
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

class SessionImpl final : public Session {
 public:
  SessionImpl(std::unique_ptr<Communicator> comm, int rank, int size, int local_rank,
              std::string host, bool by_plugin, BootstrapTimings timings, bool keeps_freed_memory)
      : comm_(std::move(comm)),
        rank_(rank),
        size_(size),
        local_rank_(local_rank),
        host_(std::move(host)),
        by_plugin_(by_plugin),
        timings_(timings),
        keeps_freed_memory_(keeps_freed_memory) {}
  ~SessionImpl() override {
    comm_.reset();
    MPI_Finalize();
  }
  SessionImpl(const SessionImpl&) = delete;
  SessionImpl& operator=(const SessionImpl&) = delete;

  Communicator& communicator() override { return *comm_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  const std::string& hostname() const override { return host_; }
  bool launched_by_plugin() const override { return by_plugin_; }
  const BootstrapTimings& timings() const override { return timings_; }
  bool keeps_freed_memory() const override { return keeps_freed_memory_; }

 private:
  std::unique_ptr<Communicator> comm_;
  int rank_, size_, local_rank_;
  std::string host_;
  bool by_plugin_;
  BootstrapTimings timings_;
  bool keeps_freed_memory_;
};

// What the second thread finds while MPI_Init runs.
struct Background {
  Fingerprint fingerprint;
  ListScan scan;
};

// The bootstrap of one process: what it finds out alone (before and during MPI_Init), then
// the agreement protocol (agreement.hpp) over MPI_COMM_WORLD, driven by polling.
class Bootstrapper {
 public:
  Bootstrapper(const BootstrapConfig& config, Clock::time_point started,
               std::chrono::milliseconds timeout, bool keeps_freed_memory, bool tick_set)
      : config_(config),
        keeps_freed_memory_(keeps_freed_memory),
        tick_set_(tick_set),
        started_(started),
        timeout_(timeout),
        deadline_(started + timeout),
        host_(this_hostname()),
        watchdog_(deadline_ + kWatchdogGrace, timeout, "rank " + rank_hint() + " on " + host_) {}

  std::unique_ptr<Session> run(int& argc, char**& argv) {
    watchdog_.set_phase(kMpiInitPhase);
    read_plugin_env();
    if (config_.preflight) listen_before_mpi_init();
    // Hashing the executable, asking CUDA for its versions and devices (which starts the CUDA
    // driver on a GPU node) and reading the endpoint list need no MPI: they run while MPI_Init
    // waits for the others.
    const std::vector<std::size_t> wanted = wanted_entries();
    background_ = std::async(std::launch::async, [list = list_text_, wanted] {
      Background found;
      found.fingerprint = collect_fingerprint();
      if (list) found.scan = scan_endpoint_list(*list, wanted);
      return found;
    });
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised) {
      throw_invalid(
          "MPI is already initialised; let dtrain::bootstrap::init() call "
          "MPI_Init_thread instead");
    }
    const int wanted_level = mpi_thread_level(config_.thread_level);
    int provided = 0;
    MPI_Init_thread(&argc, &argv, wanted_level, &provided);
    timings_.mpi_init = seconds_between(started_, Clock::now());
    // Rank 0's check of absent ranks belongs to MPI_Init only.
    watchdog_.clear_early_check();

    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    who_ = describe_self(rank_, host_);
    watchdog_.set_who(who_);
    if (provided < wanted_level && rank_ == 0 && !config_.quiet) {
      std::fprintf(stderr, "dtrain: warning: MPI provides thread level %d, %d was asked for\n",
                   provided, wanted_level);
    }
    Background found = background_.get();
    // MPI read it; the program's child processes must not inherit it. After the other thread
    // ended: unsetenv must not race a getenv.
    unset_event_tick_after_init(tick_set_);

    // The bootstrap's own messages run on MPI_COMM_WORLD, which nobody else uses before init()
    // returns; every one of them is received before then.
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &saved_errhandler_);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    Outcome outcome;
    std::unique_ptr<Communicator> comm;
    {
      MpiFabric fabric(MPI_COMM_WORLD);
      outcome = run_protocol(fabric, build_facts(std::move(found)));
      if (outcome.kind == Outcome::Kind::kReady && config_.backend == Backend::kMpi) {
        if (MPI_Comm made = fabric.take_duplicate(); made != MPI_COMM_NULL) {
          comm = adopt_mpi_communicator(made);
        }
      }
    }
    // The list's text is not needed any more.
    list_view_.reset();
    list_text_.reset();
    if (rank_ == 0 && !config_.quiet) {
      for (const auto& note : outcome.notes) {
        std::fprintf(stderr, "dtrain: %s%s", note.c_str(), note.ends_with('\n') ? "" : "\n");
      }
    } else if (rank_ == 0) {
      // --quiet keeps warnings: a fingerprint difference allowed with --allow-mismatch.
      for (const auto& note : outcome.notes) {
        if (note.starts_with("warning:")) {
          std::fprintf(stderr, "dtrain: %s%s", note.c_str(), note.ends_with('\n') ? "" : "\n");
        }
      }
    }
    if (outcome.kind == Outcome::Kind::kTimedOut) {
      abort_job(who_, outcome.timeout +
                          "; raise the limit with DTRAIN_BOOTSTRAP_TIMEOUT=<seconds> or --timeout "
                          "if the job is just slow");
    }
    if (outcome.kind == Outcome::Kind::kFailed) fail_together(outcome);
    timings_.preflight = outcome.timings.preflight;
    timings_.arrival = outcome.timings.arrival;
    timings_.placement = outcome.timings.placement;
    timings_.verdict = outcome.timings.verdict;

    const auto comm_started = Clock::now();
    if (!comm) comm = make_communicator(outcome.local_rank);
    timings_.communicator =
        outcome.timings.communicator + seconds_between(comm_started, Clock::now());
    release_world();
    watchdog_.stop();
    timings_.total = seconds_between(started_, Clock::now());
    return std::make_unique<SessionImpl>(std::move(comm), rank_, size_, outcome.local_rank, host_,
                                         env_.present, timings_, keeps_freed_memory_);
  }

 private:
  // Read once, before MPI_Init (the early listener needs it); a bad value is reported with the
  // other checks once MPI runs, so that every rank fails together.
  void read_plugin_env() {
    try {
      env_ = read_dtrain_env(process_env, read_whole_file);
    } catch (const Error& error) {
      env_ = DtrainEnv{};
      env_error_ = error.what();
    }
    if (env_.present) {
      // Kept only until the agreement ends, and read where it lies, not copied per use.
      list_text_ = std::make_shared<const std::string>(std::move(env_.endpoints));
      env_.endpoints.clear();
    }
  }

  // This rank's entry and its preflight peers', by the plugin's rank and world size (MPI's are
  // not known yet; where they differ the check fails anyway).
  std::vector<std::size_t> wanted_entries() const {
    std::vector<std::size_t> wanted;
    if (!env_.present || env_.world_size < 1 || env_.rank < 0 || env_.rank >= env_.world_size) {
      return wanted;
    }
    wanted.push_back(static_cast<std::size_t>(env_.rank));
    for (int peer : preflight_peers(env_.rank, env_.world_size)) {
      wanted.push_back(static_cast<std::size_t>(peer));
    }
    return wanted;
  }

  // Every rank listens from before MPI_Init: with the plugin's variables on its endpoint, so
  // that rank 0 can find out while MPI_Init still waits which ranks never got this far (MPI
  // itself cannot say: the watchdog's early check); without them on an ephemeral port.
  void listen_before_mpi_init() {
    try {
      const Endpoint endpoint =
          env_.present ? parse_endpoint(env_.current_endpoint, "DTRAIN_CURRENT_ENDPOINT")
                       : derived_endpoint();
      listener_ = std::make_unique<Listener>(endpoint);
    } catch (const Error& error) {
      listener_problem_ = error.what();
      return;
    }
    if (!env_.present || env_.rank != 0 || !list_text_) return;
    const auto lead = std::min<std::chrono::milliseconds>(kAbsenceCheckLead, timeout_ / 4);
    char when[64];
    std::snprintf(when, sizeof when, "%.1f s before the deadline",
                  std::chrono::duration<double>(lead).count());
    // The list is parsed only if the check runs.
    watchdog_.set_early_check(
        deadline_ - lead, kMpiInitPhase,
        [list = list_text_, source = env_.endpoints_source, lead,
         when = std::string(when)]() -> std::string {
          const auto endpoints = parse_endpoint_list(*list, source);
          std::vector<std::string> texts;
          std::vector<ProbeTarget> targets;
          for (std::size_t r = 0; r < endpoints.size(); ++r) {
            texts.push_back(to_string(endpoints[r]));
            if (r != 0) targets.push_back({static_cast<int>(r), texts.back()});
          }
          const auto outcomes = probe_peers(targets, Clock::now() + lead / 2);
          const std::string absent = describe_absent_ranks(texts, outcomes);
          if (!absent.empty()) return "Checked " + when + ": " + absent;
          return "Every other rank answered on its endpoint " + when +
                 ": all are alive and wait in MPI_Init, so the launcher's PMIx exchange is "
                 "stuck (check srun's and slurmd's messages)";
        });
  }

  RankFacts build_facts(Background found) {
    RankFacts facts;
    facts.host = host_;
    facts.fingerprint = std::move(found.fingerprint);
    if (env_error_) facts.problems.push_back(*env_error_);
    if (env_.present) {
      facts.env = {
          true,           env_.rank,  env_.world_size, env_.local_rank, env_.local_world_size,
          env_.node_rank, env_.nnodes};
      for (auto& problem : check_env_locally(env_, found.scan)) {
        facts.problems.push_back(std::move(problem));
      }
      facts.list_hash = found.scan.hash;
      facts.list_count = found.scan.count;
      facts.list_source = env_.endpoints_source;
      facts.list_entries = std::move(found.scan.entries);
      list_view_ = std::make_unique<TextEndpointList>(*list_text_);
      facts.list = list_view_.get();
    }
    if (auto changed = disagreement_after_dtrain(env_.identity);
        !changed.empty() && !config_.allow_changed_variables) {
      facts.problems.push_back(std::move(changed));
    }
    // Found here rather than at communicator creation, so that every rank fails together
    // instead of the others waiting for NCCL until the deadline.
    if (config_.backend == Backend::kNccl) {
      if (!nccl_compiled_in()) {
        facts.problems.push_back(
            "the NCCL backend was asked for, but this dtrain was built without "
            "it; use the MPI backend or rebuild with CUDA and NCCL");
      } else if (visible_device_count() == 0) {
        facts.problems.push_back(
            "the NCCL backend was asked for, but no CUDA device is visible here "
            "(cudaGetDeviceCount found none); use the MPI backend on hosts without "
            "GPUs, or check CUDA_VISIBLE_DEVICES and the job's GPU request");
      }
    }
    facts.preflight = config_.preflight;
    if (config_.preflight) {
      if (listener_problem_) facts.problems.push_back(*listener_problem_);
      if (listener_) {
        facts.listen_endpoint = listener_->endpoint();
        facts.listen_errno = listener_->error();
      } else {
        facts.preflight = false;  // the problem above says why
      }
    }
    if (!placement_from_mpi()) facts.node = launcher_node_members(rank_);
    return facts;
  }

  // DTRAIN_BOOTSTRAP_PLACEMENT=split-type makes this rank ask MPI_Comm_split_type even where
  // the launcher's PMIx server says which ranks share its node (and so every rank, since they
  // agree on one way).
  static bool placement_from_mpi() {
    const char* value = std::getenv("DTRAIN_BOOTSTRAP_PLACEMENT");
    return value != nullptr && std::string(value) == "split-type";
  }

  Outcome run_protocol(MpiFabric& fabric, RankFacts facts) {
    ProtocolConfig protocol;
    protocol.allow_mismatch = config_.allow_mismatch;
    protocol.quiet = config_.quiet;
    protocol.duplicate = config_.backend == Backend::kMpi;
    protocol.timeout = timeout_;
    protocol.deadline = deadline_;
    ProtocolHooks hooks;
    hooks.probe = [this](const std::vector<ProbeTarget>& targets, bool early) {
      const auto now = Clock::now();
      return probe_peers(targets, std::min(deadline_, now + config_.probe_timeout), serve(),
                         early ? now + kRefusedRetryWindow : Clock::time_point{});
    };
    hooks.probes_done = [this] {
      if (listener_) listener_->close();
    };
    hooks.phase = [this](const char* name) { watchdog_.set_phase(name); };
    Suspension suspension;
    auto task = bootstrap::run_protocol(fabric, suspension, std::move(facts), protocol, hooks);
    task.start();
    while (!task.done()) {
      WaitFor* wait = suspension.pending;
      suspension.pending = nullptr;
      const auto ready = [&] {
        for (OpId op : wait->any) {
          if (fabric.test(op)) return true;
        }
        if (wait->all.empty()) return false;
        return std::all_of(wait->all.begin(), wait->all.end(),
                           [&](OpId op) { return fabric.test(op); });
      };
      // The listener keeps answering peers' probes meanwhile.
      poll_until(ready, wait->until, serve());
      wait->handle.resume();
    }
    return task.result();
  }

  std::function<void()> serve() {
    return [this] {
      if (listener_) listener_->serve();
    };
  }

  std::unique_ptr<Communicator> make_communicator(int local_rank) {
    if (config_.backend == Backend::kMpi) {
      watchdog_.set_phase("creating the MPI communicator");
      return make_mpi_communicator(MPI_COMM_WORLD);
    }
    watchdog_.set_phase("creating the NCCL communicator");
    NcclSetup setup;
    setup.comm = MPI_COMM_WORLD;
    setup.rank = rank_;
    setup.size = size_;
    setup.device = choose_device(
        local_rank, visible_device_count(),
        env_.present ? plugin_cuda_device(std::getenv("DTRAIN_CUDA_DEVICE")) : std::nullopt);
    setup.wait = [this](const std::function<bool()>& done, const std::string& step,
                        const std::function<void()>& before_abort) {
      const auto limit = rank_ == 0 ? deadline_ : deadline_ + kFollowerGrace;
      if (poll_until(done, limit)) return;
      if (before_abort) before_abort();
      abort_job(who_, "timed out after " +
                          std::to_string(
                              std::chrono::duration_cast<std::chrono::seconds>(timeout_).count()) +
                          " s " + step +
                          "; raise the limit with DTRAIN_BOOTSTRAP_TIMEOUT=<seconds> or "
                          "--timeout if the job is just slow");
    };
    return make_nccl_communicator(setup);
  }

  // Gives MPI_COMM_WORLD back with the error handler it had.
  void release_world() {
    if (saved_errhandler_ == MPI_ERRHANDLER_NULL) return;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, saved_errhandler_);
    MPI_Errhandler_free(&saved_errhandler_);
    saved_errhandler_ = MPI_ERRHANDLER_NULL;
  }

  // Every rank reached the same verdict from the same agreement, so all of them finalise MPI
  // and throw; rank 0 carries the full report.
  [[noreturn]] void fail_together(const Outcome& outcome) {
    listener_.reset();
    // Rank 0 prints the report before MPI_Finalize, which no rank leaves before all entered
    // it: a launcher that ends the job at the first non-zero exit cannot lose the report.
    if (rank_ == 0) {
      std::fprintf(stderr, "dtrain: %s: %s\n", who_.c_str(), outcome.report.c_str());
      std::fflush(stderr);
    }
    release_world();
    watchdog_.set_phase("MPI_Finalize after a failed bootstrap");
    MPI_Finalize();
    const std::string what =
        who_ + ": " + (rank_ == 0 ? "bootstrap failed (report above)" : outcome.summary);
    if (outcome.on_suspect_node) {
      write_fault_hint({host_,
                        "bootstrap preflight: an end of every failed connection between "
                        "nodes (" +
                            who_ + ")"});
    }
    if (outcome.node_fault) throw NodeFaultError(outcome.error, what);
    throw Error(outcome.error, what);
  }

  BootstrapConfig config_;
  bool keeps_freed_memory_;
  bool tick_set_;
  Clock::time_point started_;
  std::chrono::milliseconds timeout_;
  Clock::time_point deadline_;
  std::string host_;
  Watchdog watchdog_;
  std::string who_;
  MPI_Errhandler saved_errhandler_ = MPI_ERRHANDLER_NULL;
  std::future<Background> background_;
  int rank_ = -1;
  int size_ = 0;
  DtrainEnv env_;
  std::optional<std::string> env_error_;
  std::shared_ptr<const std::string> list_text_;
  std::unique_ptr<TextEndpointList> list_view_;
  std::unique_ptr<Listener> listener_;
  std::optional<std::string> listener_problem_;
  BootstrapTimings timings_;
};

}  // namespace

std::string describe_self(int rank, const std::string& host) {
  return "rank " + std::to_string(rank) + " on " + host;
}

std::unique_ptr<Session> init(int& argc, char**& argv, const BootstrapConfig& config) {
  const auto started = Clock::now();
  const auto timeout = resolve_timeout(config.timeout, process_env);
  // Before MPI_Init_thread, which reads it, and before any thread starts (setenv).
  const bool tick_set = set_event_tick_for_bootstrap();
  // Before MPI_Init_thread, so that MPI's own buffers follow the same policy from the start.
  const bool keeps_freed_memory =
      resolve_keep_freed_memory(config.keep_freed_memory, process_env) &&
      keep_freed_memory_in_heap();
  Bootstrapper bootstrapper(config, started, timeout, keeps_freed_memory, tick_set);
  return bootstrapper.run(argc, argv);
}

}  // namespace dtrain::bootstrap
