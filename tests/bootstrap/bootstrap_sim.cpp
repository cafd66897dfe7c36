// SPDX-License-Identifier: Apache-2.0
// dtrain-bootstrap-sim: the bootstrap's agreement protocol (bootstrap/agreement.hpp) run for n
// simulated ranks in one process (sim_fabric.hpp), with what each rank sent, received, decoded
// and allocated. Prints one table per path (everyone agrees; a few ranks run another binary; a
// few ranks' endpoint lists differ) and, with --check, tests that the success path is flat in n
// per rank but for O(log n) terms and that the diagnostic path grows with the differing ranks.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sim_scenario.hpp"

namespace {

using namespace dtrain::bootstrap;
using namespace dtrain::bootstrap::sim;

struct Summary {
  int ranks = 0;
  std::string path;
  RankCounts zero;
  RankCounts others;  // the largest value of each count over ranks 1..n-1
  double others_mean_peak = 0;
  bool all_ready = true;
  bool all_failed = true;
  double seconds = 0;
};

Summary summarise(int n, const std::string& path, const ScenarioResult& result) {
  Summary s;
  s.ranks = n;
  s.path = path;
  s.seconds = result.seconds;
  double peaks = 0;
  for (int r = 0; r < n; ++r) {
    const auto& rank = result.ranks[static_cast<std::size_t>(r)];
    if (!rank) continue;
    s.all_ready = s.all_ready && rank->finished && rank->outcome.kind == Outcome::Kind::kReady;
    s.all_failed = s.all_failed && rank->finished && rank->outcome.kind == Outcome::Kind::kFailed;
    const RankCounts& c = rank->counts;
    if (r == 0) {
      s.zero = c;
      continue;
    }
    auto& o = s.others;
    o.messages_sent = std::max(o.messages_sent, c.messages_sent);
    o.messages_received = std::max(o.messages_received, c.messages_received);
    o.bytes_sent = std::max(o.bytes_sent, c.bytes_sent);
    o.bytes_received = std::max(o.bytes_received, c.bytes_received);
    o.records_decoded = std::max(o.records_decoded, c.records_decoded);
    o.collectives = std::max(o.collectives, c.collectives);
    o.peak_bytes = std::max(o.peak_bytes, c.peak_bytes);
    peaks += static_cast<double>(c.peak_bytes);
  }
  s.others_mean_peak = n > 1 ? peaks / (n - 1) : 0;
  return s;
}

void print_header() {
  std::printf("%8s  %-16s | %-46s | %-52s | %7s\n", "", "", "rank 0",
              "other ranks (largest; peak also mean)", "");
  std::printf("%8s  %-16s | %6s %9s %6s %9s %4s %8s | %6s %9s %6s %9s %4s %8s %6s | %7s\n", "ranks",
              "path", "sent", "bytes", "recv", "bytes", "dec", "peak KiB", "sent", "bytes", "recv",
              "bytes", "dec", "peak KiB", "mean", "sim s");
}

void print(const Summary& s) {
  const auto kib = [](double bytes) { return bytes / 1024.0; };
  std::printf(
      "%8d  %-16s | %6llu %9llu %6llu %9llu %4llu %8.1f | %6llu %9llu %6llu %9llu %4llu %8.1f "
      "%6.1f | %7.2f\n",
      s.ranks, s.path.c_str(), static_cast<unsigned long long>(s.zero.messages_sent),
      static_cast<unsigned long long>(s.zero.bytes_sent),
      static_cast<unsigned long long>(s.zero.messages_received),
      static_cast<unsigned long long>(s.zero.bytes_received),
      static_cast<unsigned long long>(s.zero.records_decoded),
      kib(static_cast<double>(s.zero.peak_bytes)),
      static_cast<unsigned long long>(s.others.messages_sent),
      static_cast<unsigned long long>(s.others.bytes_sent),
      static_cast<unsigned long long>(s.others.messages_received),
      static_cast<unsigned long long>(s.others.bytes_received),
      static_cast<unsigned long long>(s.others.records_decoded),
      kib(static_cast<double>(s.others.peak_bytes)), kib(s.others_mean_peak), s.seconds);
  std::fflush(stdout);
}

// Spread over the world, not next to each other.
std::vector<int> spread(int n, int count) {
  std::vector<int> ranks;
  for (int i = 1; i <= count; ++i) ranks.push_back(static_cast<int>(1LL * n * i / (count + 1)));
  return ranks;
}

int log2_ceil(int n) {
  int rounds = 0;
  while ((1 << rounds) < n) ++rounds;
  return rounds;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dtrain-bootstrap-sim: runs dtrain's bootstrap agreement for n simulated ranks in one "
      "process and prints, for rank 0 and the largest over the other ranks, the messages and "
      "bytes sent and received, the records decoded and the peak heap, for three paths: every "
      "rank agrees (success), --differing ranks run another binary (binary), and --differing "
      "ranks' endpoint lists differ in one entry (list). Collectives are counted as Open MPI "
      "4.1's libnbc runs them for small messages. --check tests the flatness properties."};
  std::vector<int> sizes = {1000, 10000, 100000};
  int per_node = 8;
  int differing = 3;
  bool check = false;
  app.add_option("--ranks", sizes, "rank counts (default: 1000 10000 100000)")
      ->check(CLI::Range(2, 1 << 20));
  app.add_option("--per-node", per_node, "ranks per node (default 8)")->check(CLI::Range(1, 1024));
  app.add_option("--differing", differing, "ranks that differ on the diagnostic paths (default 3)")
      ->check(CLI::Range(1, 1000));
  app.add_flag("--check", check,
               "exit 1 unless the success path is flat in n but for O(log n) terms, decodes no "
               "record, and the diagnostic paths grow with the differing ranks only");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "dtrain: dtrain-bootstrap-sim: %s\n", error.what());
    return 2;
  }
  std::sort(sizes.begin(), sizes.end());

  std::vector<Summary> success, binary, list;
  print_header();
  for (int n : sizes) {
    Scenario scenario;
    scenario.ranks = n;
    scenario.ranks_per_node = per_node;
    success.push_back(summarise(n, "success", run_scenario(scenario)));
    print(success.back());
    Scenario other = scenario;
    for (int r : spread(n, differing)) other.other_binary.insert(r);
    binary.push_back(
        summarise(n, "binary (" + std::to_string(differing) + ")", run_scenario(other)));
    print(binary.back());
    Scenario edited = scenario;
    for (int r : spread(n, differing)) edited.list_edits[r] = {n / 2, "10.255.255.255:1"};
    list.push_back(summarise(n, "list (" + std::to_string(differing) + ")", run_scenario(edited)));
    print(list.back());
  }
  if (!check) return 0;

  int failures = 0;
  const auto expect = [&](bool ok, const std::string& what) {
    std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
    if (!ok) ++failures;
  };
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const int n = sizes[i];
    const auto& s = success[i];
    const auto bound = static_cast<std::uint64_t>(4 * (log2_ceil(n) + 1) + 2);
    const std::string at = " at " + std::to_string(n) + " ranks";
    expect(s.all_ready, "every rank ready" + at);
    expect(s.zero.records_decoded == 0 && s.others.records_decoded == 0,
           "no record decoded on the success path" + at);
    expect(std::max({s.zero.messages_sent, s.zero.messages_received, s.others.messages_sent,
                     s.others.messages_received}) <= bound,
           "messages per rank within 4 (ceil(log2 n) + 1) + 2 = " + std::to_string(bound) + at);
    expect(binary[i].all_failed && list[i].all_failed, "the differences fail every rank" + at);
    expect(binary[i].zero.records_decoded <= static_cast<std::uint64_t>(differing) + 1 &&
               binary[i].others.records_decoded == 0 &&
               list[i].zero.records_decoded == static_cast<std::uint64_t>(differing) &&
               list[i].others.records_decoded == 0,
           "only rank 0 decodes, only the differing ranks' records (and the reference's)" + at);
  }
  for (std::size_t i = 1; i < sizes.size(); ++i) {
    const auto& small = success[i - 1];
    const auto& large = success[i];
    const int more_rounds = log2_ceil(large.ranks) - log2_ceil(small.ranks);
    const std::string between =
        " from " + std::to_string(small.ranks) + " to " + std::to_string(large.ranks) + " ranks";
    // Bytes and messages: 4 collectives of at most one more message each per added round.
    expect(
        large.others.bytes_received <= small.others.bytes_received + 4 * 200 * (more_rounds + 1) &&
            large.zero.bytes_received <= small.zero.bytes_received + 4 * 200 * (more_rounds + 1),
        "bytes received per rank grow by O(log n)" + between);
    // Memory: each added round adds two preflight peers (their entries) and a few operations.
    const double allowed = 512.0 * (2 * more_rounds + 2);
    expect(static_cast<double>(large.others.peak_bytes) <=
                   static_cast<double>(small.others.peak_bytes) + allowed &&
               static_cast<double>(large.zero.peak_bytes) <=
                   static_cast<double>(small.zero.peak_bytes) + allowed,
           "peak heap per rank grows by O(log n) (at most " +
               std::to_string(static_cast<int>(allowed)) + " bytes)" + between);
    for (const auto* path : {&binary, &list}) {
      const auto& a = (*path)[i - 1];
      const auto& b = (*path)[i];
      expect(
          b.zero.bytes_received <= a.zero.bytes_received + 4 * 200 * (more_rounds + 1) + 4096 &&
              b.zero.peak_bytes <= a.zero.peak_bytes + static_cast<std::uint64_t>(allowed) + 4096,
          "rank 0's bytes and memory on the " + b.path + " path grow by O(log n)" + between);
    }
  }
  std::printf("%s\n",
              failures == 0 ? "dtrain-bootstrap-sim: flat" : "dtrain-bootstrap-sim: NOT flat");
  return failures == 0 ? 0 : 1;
}
