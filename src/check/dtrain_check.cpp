// SPDX-License-Identifier: Apache-2.0
// dtrain-check: the doctor a user runs when training misbehaves. One process per rank
// (srun --mpi=pmix --distributed-train dtrain-check); rank 0 prints what every node sees and
// what it means. Exit status: 0 healthy, 1 problems found, 2 could not run.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/deadline.hpp"
#include "bootstrap/endpoints.hpp"
#include "bootstrap/environment.hpp"
#include "bootstrap/fingerprint_probe.hpp"
#include "bootstrap/preflight.hpp"
#include "check/analysis.hpp"
#include "check/probe.hpp"
#include "check/render.hpp"
#include "core/error.hpp"

namespace {

using namespace dtrain;
using bootstrap::Clock;

constexpr int kExitCouldNotRun = 2;
// Room for "[ipv6 address]:port" in the fixed-size endpoint exchange.
constexpr std::size_t kEndpointBytes = 96;

struct Options {
  std::string json_path;
  double timeout_s = 0;
  double probe_timeout_s = 5;
  bool allow_mismatch = false;
};

// The doctor's own collective steps on top of the bootstrap's communicator: every wait is
// polled against the same deadline as the bootstrap.
class Doctor {
 public:
  Doctor(const Options& options, bootstrap::Session& session, Clock::time_point deadline)
      : options_(options),
        session_(session),
        deadline_(deadline),
        who_(bootstrap::describe_self(session.rank(), session.hostname())) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  }
  ~Doctor() { MPI_Comm_free(&comm_); }
  Doctor(const Doctor&) = delete;
  Doctor& operator=(const Doctor&) = delete;

  int run(check::RankFacts facts) {
    facts.rank = session_.rank();
    facts.local_rank = session_.local_rank();
    facts.host = session_.hostname();
    facts.fingerprint = bootstrap::collect_fingerprint();
    if (session_.local_rank() == 0) check::probe_node(facts);

    // Listening only now: every rank checked its ports before the bootstrap, whose arrival
    // step no rank leaves before all have entered it.
    const auto endpoint = facts.plugin
                              ? bootstrap::parse_endpoint(
                                    bootstrap::process_env("DTRAIN_CURRENT_ENDPOINT").value_or(""),
                                    "DTRAIN_CURRENT_ENDPOINT")
                              : bootstrap::derived_endpoint();
    bootstrap::Listener listener(endpoint);
    facts.listen_endpoint = listener.endpoint();
    facts.listen_errno = listener.error();
    const auto endpoints = exchange_endpoints(facts.listen_endpoint, listener);

    check::CheckInput input;
    input.allow_mismatch = options_.allow_mismatch;
    input.preflight_ran = true;
    const auto probe_deadline = std::min(
        deadline_, Clock::now() + std::chrono::milliseconds(
                                      static_cast<long long>(options_.probe_timeout_s * 1000)));
    input.preflight = bootstrap::run_connectivity_preflight(
        comm_, endpoints, listener, probe_deadline,
        // The preflight's waits keep this rank's listener answering the peers' probes.
        [this, &listener](const std::function<bool()>& done, const std::string& step,
                          const std::function<void()>& before_abort) {
          wait_until(
              done, step, [&listener] { listener.serve(); }, before_abort);
        });

    input.ranks = gather_facts(facts);
    int status = 0;
    if (session_.rank() == 0) {
      const check::CheckReport report = check::analyse(input);
      std::fputs(check::render_report(report).c_str(), stdout);
      std::fflush(stdout);
      status = report.exit_status();
      if (!options_.json_path.empty()) {
        std::ofstream out(options_.json_path);
        out << check::report_to_json(report).dump(2) << "\n";
        if (!out) {
          throw Error(ErrorKind::kResource, "cannot write --json " + options_.json_path);
        }
      }
    }
    MPI_Request request;
    MPI_Ibcast(&status, 1, MPI_INT, 0, comm_, &request);
    wait({&request, 1}, "waiting for rank 0's verdict", {});
    return status;
  }

 private:
  void wait(std::span<MPI_Request> requests, const std::string& step,
            const std::function<void()>& between) {
    wait_until([requests] { return bootstrap::requests_complete(requests); }, step, between, {});
  }

  void wait_until(const std::function<bool()>& done, const std::string& step,
                  const std::function<void()>& between, const std::function<void()>& before_abort) {
    if (bootstrap::poll_until(done, deadline_, between)) return;
    if (before_abort) before_abort();
    bootstrap::abort_job(who_, "dtrain-check timed out " + step +
                                   "; a rank died or is stuck; raise the limit with --timeout if "
                                   "the job is just slow");
  }

  std::vector<std::string> exchange_endpoints(const std::string& mine,
                                              bootstrap::Listener& listener) {
    std::vector<char> slot(kEndpointBytes, '\0');
    mine.copy(slot.data(), std::min(mine.size(), kEndpointBytes - 1));
    std::vector<char> all(kEndpointBytes * static_cast<std::size_t>(session_.size()));
    MPI_Request request;
    MPI_Iallgather(slot.data(), static_cast<int>(kEndpointBytes), MPI_CHAR, all.data(),
                   static_cast<int>(kEndpointBytes), MPI_CHAR, comm_, &request);
    wait({&request, 1}, "exchanging the preflight endpoints", [&listener] { listener.serve(); });
    std::vector<std::string> endpoints;
    for (int r = 0; r < session_.size(); ++r) {
      endpoints.emplace_back(all.data() + kEndpointBytes * static_cast<std::size_t>(r));
    }
    return endpoints;
  }

  // Only rank 0 needs everybody's facts: a gather, not an all-gather.
  std::vector<check::RankFacts> gather_facts(const check::RankFacts& facts) {
    const std::string mine = check::to_json(facts).dump();
    int length = static_cast<int>(mine.size());
    const auto size = static_cast<std::size_t>(session_.size());
    std::vector<int> lengths(session_.rank() == 0 ? size : 0);
    MPI_Request request;
    MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm_, &request);
    wait({&request, 1}, "gathering the ranks' reports", {});
    std::vector<int> offsets(lengths.size(), 0);
    int total = 0;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
      offsets[r] = total;
      total += lengths[r];
    }
    std::string all(static_cast<std::size_t>(total), '\0');
    MPI_Igatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                 MPI_CHAR, 0, comm_, &request);
    wait({&request, 1}, "gathering the ranks' reports", {});
    std::vector<check::RankFacts> by_rank;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
      const auto text =
          all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r]));
      const auto json = nlohmann::json::parse(text, nullptr, false);
      if (json.is_discarded()) {
        throw Error(ErrorKind::kMismatch, "rank " + std::to_string(r) +
                                              " sent a report that is not JSON; is it running "
                                              "the same dtrain-check?");
      }
      by_rank.push_back(check::rank_facts_from_json(json, static_cast<int>(r)));
    }
    return by_rank;
  }

  const Options& options_;
  bootstrap::Session& session_;
  Clock::time_point deadline_;
  std::string who_;
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dtrain-check: the doctor to run when distributed training misbehaves. Run it as a step "
      "of the same shape as the job: srun --mpi=pmix --distributed-train -N<nodes> -n<tasks> "
      "dtrain-check. Rank 0 prints, per node, the GPUs seen, the binding the plugin chose, "
      "whether the endpoint and master ports are free, endpoint reachability, whether all ranks "
      "run the same software, the NCCL/UCX/CUDA environment, and each finding with the symptom "
      "it explains and its fix. Exit status: 0 healthy, 1 problems found, 2 could not run."};
  Options options;
  bool troubleshooting = false;
  app.add_option("--json", options.json_path,
                 "also write the report as JSON to this file (rank 0)");
  app.add_flag("--allow-mismatch", options.allow_mismatch,
               "report ranks that run different binaries or library versions as a warning, "
               "not a problem");
  app.add_option("--timeout", options.timeout_s,
                 "deadline in seconds for the whole check (default DTRAIN_BOOTSTRAP_TIMEOUT or 60)")
      ->check(CLI::PositiveNumber);
  app.add_option("--probe-timeout", options.probe_timeout_s,
                 "seconds each endpoint probe of the preflight may take")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--troubleshooting-markdown", troubleshooting,
               "print the troubleshooting section (every finding, its symptom and fix) as "
               "Markdown, as README.md carries it, and exit; needs no MPI");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "dtrain: dtrain-check: %s (see --help)\n", error.what());
    return kExitCouldNotRun;
  }
  if (troubleshooting) {
    std::fputs(check::troubleshooting_markdown().c_str(), stdout);
    return 0;
  }

  // Before the bootstrap, which is where this step starts to listen.
  check::RankFacts facts = check::probe_rank();

  bootstrap::BootstrapConfig config;
  config.allow_mismatch = true;  // the doctor reports differences instead of stopping
  config.allow_changed_variables = true;
  config.preflight = false;  // run below, after the facts are in, so failures are reported
  config.quiet = true;       // a missing plugin is a finding, not a note
  if (options.timeout_s > 0) {
    config.timeout = std::chrono::milliseconds(static_cast<long long>(options.timeout_s * 1000));
  }
  const auto started = Clock::now();
  std::unique_ptr<bootstrap::Session> session;
  try {
    session = bootstrap::init(argc, argv, config);
  } catch (const Error& error) {
    // The bootstrap's own checks failed (environment against MPI, unreadable records): rank 0
    // printed the details above; they are problems with the launch, not with the doctor.
    std::fprintf(stderr, "dtrain: dtrain-check: %s\n", error.what());
    return error.kind() == ErrorKind::kInternal ? kExitCouldNotRun : 1;
  }
  try {
    const auto deadline =
        started + bootstrap::resolve_timeout(config.timeout, bootstrap::process_env);
    Doctor doctor(options, *session, deadline);
    return doctor.run(std::move(facts));
  } catch (const std::exception& error) {
    // Other ranks may be inside a collective: end the whole job, not just this rank.
    std::fprintf(stderr, "dtrain: dtrain-check: %s: %s\n",
                 bootstrap::describe_self(session->rank(), session->hostname()).c_str(),
                 error.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, kExitCouldNotRun);
    return kExitCouldNotRun;
  }
}
