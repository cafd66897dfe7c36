#include "bootstrap/bootstrap.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <sstream>

#include "bootstrap/deadline.hpp"
#include "bootstrap/endpoints.hpp"
#include "bootstrap/environment.hpp"
#include "bootstrap/fingerprint.hpp"
#include "bootstrap/fingerprint_probe.hpp"
#include "bootstrap/gather.hpp"
#include "bootstrap/heap.hpp"
#include "bootstrap/mpi_communicator.hpp"
#include "bootstrap/nccl_backend.hpp"
#include "bootstrap/peers.hpp"
#include "bootstrap/preflight.hpp"
#include "bootstrap/preflight_report.hpp"
#include "core/error.hpp"

namespace dtrain::bootstrap {

namespace {

constexpr int kArrivalTag = 0x6474;
// The watchdog backs up the polled steps, which report more precisely, so it fires later.
constexpr std::chrono::seconds kWatchdogGrace{3};
constexpr std::chrono::milliseconds kFollowerGrace{1500};
// How long before the deadline rank 0 checks, while MPI_Init still waits, which ranks listen on
// their endpoints; well before any rank's watchdog ends it (kWatchdogGrace after the deadline).
constexpr std::chrono::milliseconds kAbsenceCheckLead{2000};
constexpr const char* kMpiInitPhase = "MPI_Init_thread";
// How long probes made before the record exchange retry a refused connect.
constexpr std::chrono::milliseconds kRefusedRetryWindow{250};

// Open MPI's TCP transport sees a peer's new connection only when the passive side's event loop
// runs, which after MPI_Init is every mpi_event_tick_rate microseconds (default 10 ms) unless
// the process is itself connecting. Every exchange of the bootstrap, and MPI_Comm_dup, opens
// connections, so each round waited up to 10 ms on some rank: at 8 ranks on 4 nodes that was
// most of the time after MPI_Init (bootstrap/README.md, "Open MPI's event tick"). 1 ms costs
// one epoll_wait per millisecond of polling. Before MPI_Init_thread, which reads it, and before
// any thread starts (setenv); a value the user set wins.
void prompt_open_mpi_event_loop() {
#ifdef OPEN_MPI
  setenv("OMPI_MCA_mpi_event_tick_rate", "1000", 0);
#endif
}

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

std::string join_lines(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += "\n  " + line;
  return text;
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

// The bootstrap of one process, step by step. Every step that needs the other ranks is a
// non-blocking MPI call polled against the deadline.
class Bootstrapper {
 public:
  Bootstrapper(const BootstrapConfig& config, Clock::time_point started,
               std::chrono::milliseconds timeout, bool keeps_freed_memory)
      : config_(config),
        keeps_freed_memory_(keeps_freed_memory),
        started_(started),
        timeout_(timeout),
        deadline_(started + timeout),
        host_(this_hostname()),
        watchdog_(deadline_ + kWatchdogGrace, timeout, "rank " + rank_hint() + " on " + host_) {}

  std::unique_ptr<Session> run(int& argc, char**& argv) {
    watchdog_.set_phase(kMpiInitPhase);
    read_plugin_env();
    if (config_.preflight) listen_before_mpi_init();
    // Hashing the executable and asking CUDA for its versions and devices (which starts the
    // CUDA driver on a GPU node) need no MPI: they run while MPI_Init waits for the others.
    fingerprint_ = std::async(std::launch::async, collect_fingerprint);
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised) {
      throw_invalid(
          "MPI is already initialised; let dtrain::bootstrap::init() call "
          "MPI_Init_thread instead");
    }
    const int wanted = mpi_thread_level(config_.thread_level);
    int provided = 0;
    MPI_Init_thread(&argc, &argv, wanted, &provided);
    timings_.mpi_init = seconds_between(started_, Clock::now());

    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    who_ = describe_self(rank_, host_);
    watchdog_.set_who(who_);
    if (provided < wanted && rank_ == 0 && !config_.quiet) {
      std::fprintf(stderr, "dtrain: warning: MPI provides thread level %d, %d was asked for\n",
                   provided, wanted);
    }

    // The bootstrap's own messages run on MPI_COMM_WORLD, which nobody else uses before init()
    // returns: a duplicate would cost a context-id agreement (several all-reduces). Arrival
    // comes first (exchange_records): any collective could hang on a missing rank without
    // saying which.
    boot_ = MPI_COMM_WORLD;
    MPI_Comm_get_errhandler(boot_, &saved_errhandler_);
    MPI_Comm_set_errhandler(boot_, MPI_ERRORS_RETURN);
    const auto probes_started = Clock::now();
    if (config_.preflight) probe_before_exchange();
    const auto arrival_started = Clock::now();
    timings_.preflight = seconds_between(probes_started, arrival_started);
    exchange_records();
    const auto placement_started = Clock::now();
    timings_.arrival = seconds_between(arrival_started, placement_started);
    place_ranks_on_nodes();
    const auto verdict_started = Clock::now();
    timings_.placement = seconds_between(placement_started, verdict_started);
    check_agreement();
    timings_.verdict = seconds_between(verdict_started, Clock::now());

    const auto preflight_started = Clock::now();
    if (config_.preflight) run_preflight();
    timings_.preflight += seconds_between(preflight_started, Clock::now());

    const auto comm_started = Clock::now();
    auto comm = make_communicator();
    timings_.communicator = seconds_between(comm_started, Clock::now());
    release_boot_comm();
    watchdog_.stop();
    timings_.total = seconds_between(started_, Clock::now());
    return std::make_unique<SessionImpl>(std::move(comm), rank_, size_, placement_.local_rank,
                                         host_, env_.present, timings_, keeps_freed_memory_);
  }

 private:
  void wait_or_abort(std::span<MPI_Request> requests, const std::string& step,
                     const std::function<std::string()>& detail = {}) {
    wait_until_or_abort([requests] { return requests_complete(requests); }, step, detail, {});
  }

  // Every wait of the bootstrap: its listener keeps answering peers' probes meanwhile.
  void wait_until_or_abort(const std::function<bool()>& done, const std::string& step,
                           const std::function<std::string()>& detail,
                           const std::function<void()>& before_abort) {
    const std::function<void()> serve = [this] {
      if (listener_) listener_->serve();
    };
    // Rank 0 gives up first: it is the one that can name the missing ranks, and its
    // MPI_Abort ends the others before their own, less informative, timeout.
    const auto limit = rank_ == 0 ? deadline_ : deadline_ + kFollowerGrace;
    if (poll_until(done, limit, serve)) return;
    if (before_abort) before_abort();
    std::string message =
        "timed out after " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout_).count()) + " s " +
        step;
    if (detail) message += detail();
    message +=
        "; raise the limit with DTRAIN_BOOTSTRAP_TIMEOUT=<seconds> or --timeout if the "
        "job is just slow";
    abort_job(who_, message);
  }

  // wait_until_or_abort for the helpers that take a DeadlineWaiter.
  DeadlineWaiter deadline_waiter() {
    return [this](const std::function<bool()>& done, const std::string& step,
                  const std::function<void()>& before_abort) {
      wait_until_or_abort(done, step, {}, before_abort);
    };
  }

  // Read once, before MPI_Init (the early listener needs it); a bad value is reported with the
  // other checks once MPI runs, so that every rank fails together.
  void read_plugin_env() {
    try {
      env_ = read_dtrain_env(process_env, read_whole_file);
    } catch (const Error& error) {
      env_ = DtrainEnv{};
      env_error_ = error.what();
    }
  }

  // With the plugin's variables every rank knows its own endpoint and every peer's before MPI
  // starts. Listening from here on lets rank 0 find out, while MPI_Init still waits, which ranks
  // never got this far: MPI itself cannot say (the watchdog's early check). build_record reuses
  // the listener for the preflight.
  void listen_before_mpi_init() {
    if (!env_.present) return;
    try {
      listener_ = std::make_unique<Listener>(
          parse_endpoint(env_.current_endpoint, "DTRAIN_CURRENT_ENDPOINT"));
      plugin_endpoints_ = parse_endpoint_list(env_.endpoints, env_.endpoints_source);
    } catch (const Error&) {
      plugin_endpoints_.clear();
      return;  // reported with the other checks once MPI runs
    }
    const auto& endpoints = plugin_endpoints_;
    if (env_.rank != 0 || endpoints.size() < 2) return;
    std::vector<std::string> texts;
    std::vector<ProbeTarget> targets;
    for (std::size_t r = 0; r < endpoints.size(); ++r) {
      texts.push_back(to_string(endpoints[r]));
      if (r != 0) targets.push_back({static_cast<int>(r), texts.back()});
    }
    const auto lead = std::min<std::chrono::milliseconds>(kAbsenceCheckLead, timeout_ / 4);
    char when[64];
    std::snprintf(when, sizeof when, "%.1f s before the deadline",
                  std::chrono::duration<double>(lead).count());
    watchdog_.set_early_check(
        deadline_ - lead, kMpiInitPhase,
        [targets, texts, lead, when = std::string(when)]() -> std::string {
          const auto outcomes = probe_peers(targets, Clock::now() + lead / 2);
          const std::string absent = describe_absent_ranks(texts, outcomes);
          if (!absent.empty()) return "Checked " + when + ": " + absent;
          return "Every other rank answered on its endpoint " + when +
                 ": all are alive and wait in MPI_Init, so the launcher's PMIx exchange is "
                 "stuck (check srun's and slurmd's messages)";
        });
  }

  // The preflight's probes, made before the record exchange so that their outcomes travel with
  // the records instead of in an exchange of their own. Every peer listens by now: each opened
  // its listener before MPI_Init, and MPI_Init returns only once every rank has entered it (the
  // launcher's PMIx fence). A refused connect is still retried briefly, for an MPI without that
  // fence. Needs the plugin's endpoint list for this world; otherwise the preflight probes after
  // the exchange, from the endpoints in the records.
  void probe_before_exchange() {
    if (!listener_ || plugin_endpoints_.size() != static_cast<std::size_t>(size_)) return;
    watchdog_.set_phase("connectivity preflight");
    std::vector<ProbeTarget> targets;
    for (int peer : preflight_peers(rank_, size_)) {
      targets.push_back({peer, to_string(plugin_endpoints_[static_cast<std::size_t>(peer)])});
    }
    const auto now = Clock::now();
    const auto outcomes = probe_peers(
        targets, std::min(deadline_, now + config_.probe_timeout), [this] { listener_->serve(); },
        now + kRefusedRetryWindow);
    auto& failures = early_probe_failures_.emplace();
    for (const auto& outcome : outcomes) {
      if (outcome.error != 0) failures.push_back(outcome);
    }
  }

  // Which ranks share a node, as MPI sees it: from the launcher's node names in the records
  // when every rank has one (no communication), else MPI_Comm_split_type and a second exchange.
  // Every rank holds the same records, so all take the same branch.
  void place_ranks_on_nodes() {
    auto placements = placement_from_launcher_nodes(records_);
    if (!placements) placements = placements_from_split_type();
    for (std::size_t r = 0; r < records_.size(); ++r) records_[r].mpi = (*placements)[r];
    placement_ = records_[static_cast<std::size_t>(rank_)].mpi;
  }

  std::vector<MpiPlacement> placements_from_split_type() {
    watchdog_.set_phase("MPI_Comm_split_type");
    MPI_Comm node;
    MpiPlacement mine;
    MPI_Comm_split_type(boot_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
    mine.rank = rank_;
    mine.size = size_;
    MPI_Comm_rank(node, &mine.local_rank);
    MPI_Comm_size(node, &mine.local_size);
    MPI_Group node_group, world_group;
    MPI_Comm_group(node, &node_group);
    MPI_Comm_group(boot_, &world_group);
    const int first = 0;
    MPI_Group_translate_ranks(node_group, 1, &first, world_group, &mine.node_leader);
    MPI_Group_free(&node_group);
    MPI_Group_free(&world_group);
    MPI_Comm_free(&node);
    const int fields[5] = {mine.rank, mine.size, mine.local_rank, mine.local_size,
                           mine.node_leader};
    std::vector<int> all(5 * static_cast<std::size_t>(size_));
    allgather_through_root(fields, static_cast<int>(sizeof fields), all.data(), boot_,
                           deadline_waiter(), "exchanging the ranks' node placement");
    std::vector<MpiPlacement> placements;
    for (std::size_t r = 0; r < static_cast<std::size_t>(size_); ++r) {
      const int* f = all.data() + 5 * r;
      placements.push_back({f[0], f[1], f[2], f[3], f[4]});
    }
    return placements;
  }

  RankRecord build_record() {
    RankRecord me;
    me.mpi.rank = rank_;  // the rest of the placement is known once all records are in
    me.mpi.size = size_;
    me.hostname = host_;
    if (const char* node = std::getenv("PMIX_HOSTNAME")) me.launcher_node = node;
    std::vector<std::string> problems;
    if (env_error_) problems.push_back(*env_error_);
    for (auto& problem : check_env_locally(env_)) problems.push_back(std::move(problem));
    if (auto changed = disagreement_after_dtrain(env_.identity);
        !changed.empty() && !config_.allow_changed_variables) {
      problems.push_back(std::move(changed));
    }
    me.env = env_;
    me.endpoints_hash = env_.present ? hash_text(env_.endpoints) : 0;
    me.fingerprint = fingerprint_.get();
    // Found here rather than at communicator creation, so that every rank fails together
    // instead of the others waiting for NCCL until the deadline.
    if (config_.backend == Backend::kNccl) {
      if (!nccl_compiled_in()) {
        problems.push_back(
            "the NCCL backend was asked for, but this dtrain was built without "
            "it; use the MPI backend or rebuild with CUDA and NCCL");
      } else if (visible_device_count() == 0) {
        problems.push_back(
            "the NCCL backend was asked for, but no CUDA device is visible here "
            "(cudaGetDeviceCount found none); use the MPI backend on hosts without "
            "GPUs, or check CUDA_VISIBLE_DEVICES and the job's GPU request");
      }
    }
    if (config_.preflight) {
      try {
        if (!listener_) {
          const Endpoint endpoint =
              env_.present ? parse_endpoint(env_.current_endpoint, "DTRAIN_CURRENT_ENDPOINT")
                           : derived_endpoint();
          listener_ = std::make_unique<Listener>(endpoint);
        }
        me.listen_endpoint = listener_->endpoint();
        me.listen_errno = listener_->error();
        me.early_probe_failures = early_probe_failures_;
      } catch (const Error& error) {
        problems.push_back(error.what());
      }
    }
    for (const auto& problem : problems) me.problem += (me.problem.empty() ? "" : "; ") + problem;
    return me;
  }

  // Arrival and the first exchange in one: every rank sends its record to rank 0, which counts
  // them one by one so that a timeout can name the ranks that never came, then broadcasts all
  // of them. (Open MPI's MPI_Iallgather is linear and would leave every rank with a TCP
  // connection to every other, which each later progress call polls.) All of these requests
  // complete before init() returns, so the tag never meets user traffic.
  void exchange_records() {
    constexpr const char* kStep = "waiting for all ranks to start the bootstrap";
    watchdog_.set_phase("waiting for all ranks to arrive");
    require_one_message(kRecordBytes, size_, kStep);
    const std::vector<char> mine = encode_record(build_record());
    std::vector<char> all(kRecordBytes * static_cast<std::size_t>(size_), '\0');
    std::vector<MPI_Request> requests;
    if (rank_ == 0) {
      std::memcpy(all.data(), mine.data(), kRecordBytes);
      for (int r = 1; r < size_; ++r) {
        requests.emplace_back();
        MPI_Irecv(all.data() + kRecordBytes * static_cast<std::size_t>(r),
                  static_cast<int>(kRecordBytes), MPI_CHAR, r, kArrivalTag, boot_,
                  &requests.back());
      }
    } else {
      requests.emplace_back();
      MPI_Isend(mine.data(), static_cast<int>(kRecordBytes), MPI_CHAR, 0, kArrivalTag, boot_,
                &requests.back());
    }
    constexpr const char* kRankZeroNames = " (rank 0 names the ranks that are missing)";
    // A record is JSON, so a received one never starts with the zero byte it was cleared to.
    wait_or_abort(requests, kStep, [&]() -> std::string {
      if (rank_ != 0) return kRankZeroNames;
      std::vector<int> missing;
      for (int r = 1; r < size_; ++r) {
        if (all[kRecordBytes * static_cast<std::size_t>(r)] == '\0') missing.push_back(r);
      }
      return missing.empty()
                 ? std::string(" (every record came, but not every receive finished)")
                 : (missing.size() == 1 ? "; rank " : "; ranks ") + format_rank_set(missing) +
                       " never arrived (died, or stuck before dtrain's bootstrap)";
    });
    if (size_ > 1) {
      MPI_Request broadcast;
      MPI_Ibcast(all.data(), static_cast<int>(all.size()), MPI_CHAR, 0, boot_, &broadcast);
      wait_or_abort({&broadcast, 1}, kStep,
                    [&]() -> std::string { return rank_ == 0 ? "" : kRankZeroNames; });
    }
    std::vector<std::string> unreadable;
    for (int r = 0; r < size_; ++r) {
      try {
        records_.push_back(decode_record(all.data() + kRecordBytes * static_cast<std::size_t>(r),
                                         kRecordBytes, r));
      } catch (const Error& error) {
        unreadable.push_back(error.what());
      }
    }
    if (!unreadable.empty()) {
      fail_together(ErrorKind::kMismatch, "bootstrap records disagree:" + join_lines(unreadable),
                    unreadable.front());
    }
  }

  void check_agreement() {
    std::vector<std::string> problems;
    for (const auto& record : records_) {
      if (!record.problem.empty()) {
        problems.push_back(describe_self(record.mpi.rank, record.hostname) + ": " + record.problem);
      }
    }
    if (problems.empty()) {
      for (auto& problem : check_env_agreement(records_)) problems.push_back(std::move(problem));
    }
    const bool all_have_env = std::all_of(records_.begin(), records_.end(),
                                          [](const RankRecord& r) { return r.env.present; });
    std::string own_difference;
    if (all_have_env) {
      own_difference = compare_endpoint_list_with_rank0();
      // Rank 0 carries every rank's first difference: a launcher that ends the job at the
      // first non-zero exit could otherwise kill a rank before it says what differs.
      for (auto& difference : gather_differences(own_difference)) {
        problems.push_back(std::move(difference));
      }
    }
    if (!problems.empty()) {
      fail_together(ErrorKind::kMismatch, "bootstrap checks failed:" + join_lines(problems),
                    own_difference.empty() ? "bootstrap checks failed (rank 0 prints the details)"
                                           : own_difference);
    }
    if (!env_.present && rank_ == 0 && !config_.quiet) {
      std::fprintf(stderr,
                   "dtrain: note: no DTRAIN_* variables (not launched with srun "
                   "--distributed-train); skipping the environment check; the preflight uses "
                   "endpoints derived from MPI (host name address, ephemeral port)\n");
    }
    std::vector<Fingerprint> fingerprints;
    for (const auto& record : records_) fingerprints.push_back(record.fingerprint);
    const std::string table = fingerprint_mismatch_table(fingerprints);
    if (table.empty()) return;
    if (config_.allow_mismatch) {
      if (rank_ == 0) {
        std::fprintf(stderr,
                     "dtrain: warning: the ranks differ (continuing because of "
                     "--allow-mismatch):\n%s",
                     table.c_str());
      }
      return;
    }
    fail_together(ErrorKind::kMismatch,
                  "the ranks do not run the same software (pass --allow-mismatch to continue "
                  "anyway):\n" +
                      table,
                  "the ranks do not run the same software (rank 0 prints the table)");
  }

  // When the list hashes differ, rank 0 sends its list; each differing rank finds the first
  // differing entry and returns its message ("" on ranks that agree).
  std::string compare_endpoint_list_with_rank0() {
    std::vector<int> differing;
    for (const auto& record : records_) {
      if (record.endpoints_hash != records_.front().endpoints_hash)
        differing.push_back(record.mpi.rank);
    }
    if (differing.empty()) return {};
    watchdog_.set_phase("comparing endpoint lists");
    unsigned long long length = rank_ == 0 ? env_.endpoints.size() : 0;
    MPI_Request request;
    MPI_Ibcast(&length, 1, MPI_UNSIGNED_LONG_LONG, 0, boot_, &request);
    wait_or_abort({&request, 1}, "comparing endpoint lists");
    std::string reference = rank_ == 0 ? env_.endpoints : std::string(length, '\0');
    MPI_Ibcast(reference.data(), static_cast<int>(length), MPI_CHAR, 0, boot_, &request);
    wait_or_abort({&request, 1}, "comparing endpoint lists");
    const auto difference = first_difference(reference, env_.endpoints);
    if (!difference) return {};
    const std::string message =
        "the endpoint list (" + env_.endpoints_source + ") differs from rank 0's at entry " +
        std::to_string(difference->index) + ": rank 0 has '" + difference->left + "', rank " +
        std::to_string(rank_) + " has '" + difference->right + "'";
    return message;
  }

  // Every rank's non-empty message, on rank 0 (empty elsewhere). Only runs when the
  // endpoint lists differ, which every rank knows from the gathered hashes.
  std::vector<std::string> gather_differences(const std::string& mine) {
    const bool any = std::any_of(records_.begin(), records_.end(), [&](const RankRecord& r) {
      return r.endpoints_hash != records_.front().endpoints_hash;
    });
    if (!any) return {};
    watchdog_.set_phase("gathering endpoint list differences");
    int length = static_cast<int>(mine.size());
    std::vector<int> lengths(rank_ == 0 ? records_.size() : 0);
    MPI_Request request;
    MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, boot_, &request);
    wait_or_abort({&request, 1}, "gathering endpoint list differences");
    std::vector<int> offsets(lengths.size(), 0);
    for (std::size_t i = 1; i < lengths.size(); ++i) offsets[i] = offsets[i - 1] + lengths[i - 1];
    std::string all(lengths.empty() ? 0 : static_cast<std::size_t>(offsets.back() + lengths.back()),
                    '\0');
    MPI_Igatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                 MPI_CHAR, 0, boot_, &request);
    wait_or_abort({&request, 1}, "gathering endpoint list differences");
    std::vector<std::string> messages;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      if (lengths[i] > 0) {
        messages.push_back(
            describe_self(static_cast<int>(i), records_[i].hostname) + ": " +
            all.substr(static_cast<std::size_t>(offsets[i]), static_cast<std::size_t>(lengths[i])));
      }
    }
    return messages;
  }

  void run_preflight() {
    watchdog_.set_phase("connectivity preflight");
    auto by_source = early_preflight_outcomes(records_);
    if (by_source) {
      // Every rank sent its record after its probes, and the records are all here: nobody
      // probes this listener any more.
      listener_->close();
    } else {
      std::vector<std::string> endpoints;
      for (const auto& record : records_) endpoints.push_back(record.listen_endpoint);
      const auto probe_deadline = std::min(deadline_, Clock::now() + config_.probe_timeout);
      by_source = run_connectivity_preflight(boot_, endpoints, *listener_, probe_deadline,
                                             deadline_waiter());
    }
    const auto failures = describe_preflight(records_, *by_source);
    if (failures.empty()) return;
    std::string own;
    const std::string me = "rank " + std::to_string(rank_) + " ";
    for (const auto& failure : failures) {
      if (failure.starts_with(me)) own += (own.empty() ? "" : "; ") + failure;
    }
    fail_together(ErrorKind::kResource, "connectivity preflight failed:" + join_lines(failures),
                  own.empty() ? "connectivity preflight failed (rank 0 prints the details)"
                              : "connectivity preflight failed: " + own);
  }

  std::unique_ptr<Communicator> make_communicator() {
    if (config_.backend == Backend::kMpi) {
      watchdog_.set_phase("creating the MPI communicator");
      return make_mpi_communicator(boot_);
    }
    watchdog_.set_phase("creating the NCCL communicator");
    NcclSetup setup;
    setup.comm = boot_;
    setup.rank = rank_;
    setup.size = size_;
    const bool bound = env_.present && std::getenv("CUDA_VISIBLE_DEVICES") != nullptr;
    setup.device = choose_device(placement_.local_rank, visible_device_count(), bound);
    setup.wait = deadline_waiter();
    return make_nccl_communicator(setup);
  }

  // Gives MPI_COMM_WORLD back with the error handler it had.
  void release_boot_comm() {
    if (boot_ == MPI_COMM_NULL) return;
    MPI_Comm_set_errhandler(boot_, saved_errhandler_);
    MPI_Errhandler_free(&saved_errhandler_);
    boot_ = MPI_COMM_NULL;
  }

  // Every rank reaches the same verdict from the same gathered data, so all of them finalise
  // MPI and throw; rank 0 carries the full report.
  [[noreturn]] void fail_together(ErrorKind kind, const std::string& full,
                                  const std::string& summary) {
    listener_.reset();
    // Rank 0 prints the report before MPI_Finalize, which no rank leaves before all entered
    // it: a launcher that ends the job at the first non-zero exit cannot lose the report.
    if (rank_ == 0) {
      std::fprintf(stderr, "dtrain: %s: %s\n", who_.c_str(), full.c_str());
      std::fflush(stderr);
    }
    release_boot_comm();
    watchdog_.set_phase("MPI_Finalize after a failed bootstrap");
    MPI_Finalize();
    throw Error(kind, who_ + ": " + (rank_ == 0 ? "bootstrap failed (report above)" : summary));
  }

  BootstrapConfig config_;
  bool keeps_freed_memory_;
  Clock::time_point started_;
  std::chrono::milliseconds timeout_;
  Clock::time_point deadline_;
  std::string host_;
  Watchdog watchdog_;
  std::string who_;
  MPI_Comm boot_ = MPI_COMM_NULL;
  MPI_Errhandler saved_errhandler_ = MPI_ERRHANDLER_NULL;
  std::future<Fingerprint> fingerprint_;
  int rank_ = -1;
  int size_ = 0;
  MpiPlacement placement_;
  DtrainEnv env_;
  std::optional<std::string> env_error_;
  std::unique_ptr<Listener> listener_;
  std::vector<Endpoint> plugin_endpoints_;  // parsed before MPI_Init; empty if unusable
  std::optional<std::vector<ProbeOutcome>> early_probe_failures_;
  std::vector<RankRecord> records_;
  BootstrapTimings timings_;
};

}  // namespace

std::string describe_self(int rank, const std::string& host) {
  return "rank " + std::to_string(rank) + " on " + host;
}

std::unique_ptr<Session> init(int& argc, char**& argv, const BootstrapConfig& config) {
  const auto started = Clock::now();
  const auto timeout = resolve_timeout(config.timeout, process_env);
  prompt_open_mpi_event_loop();
  // Before MPI_Init_thread, so that MPI's own buffers follow the same policy from the start.
  const bool keeps_freed_memory =
      resolve_keep_freed_memory(config.keep_freed_memory, process_env) &&
      keep_freed_memory_in_heap();
  Bootstrapper bootstrapper(config, started, timeout, keeps_freed_memory);
  return bootstrapper.run(argc, argv);
}

}  // namespace dtrain::bootstrap
