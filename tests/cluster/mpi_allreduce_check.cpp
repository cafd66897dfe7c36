// SPDX-License-Identifier: Apache-2.0
// Checks a real MPI job on the local cluster: an allreduce across all ranks gives the exact sum,
// and the ranks run on as many distinct hosts as expected (each emulated node has its own
// hostname, so a step that silently stayed on one node fails here).
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <climits>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr int kHostnameBytes = HOST_NAME_MAX + 1;

std::string this_hostname() {
  std::array<char, kHostnameBytes> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) {
    return "?";
  }
  return name.data();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Runs an MPI allreduce and checks its sum and the number of distinct hosts of the ranks."};
  int expected_ranks = 0;
  int expected_hosts = 0;
  app.add_option("--ranks", expected_ranks, "expected MPI world size")
      ->required()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--hosts", expected_hosts, "expected number of distinct hostnames")
      ->required()
      ->check(CLI::Range(1, 1 << 20));
  CLI11_PARSE(app, argc, argv);

  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  const long long contribution = rank + 1;
  long long sum = 0;
  MPI_Allreduce(&contribution, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  const long long expected_sum = static_cast<long long>(size) * (size + 1) / 2;

  std::array<char, kHostnameBytes> own_name{};
  this_hostname().copy(own_name.data(), own_name.size() - 1);
  std::vector<char> all_names(static_cast<std::size_t>(size) * kHostnameBytes);
  MPI_Allgather(own_name.data(), kHostnameBytes, MPI_CHAR, all_names.data(), kHostnameBytes,
                MPI_CHAR, MPI_COMM_WORLD);
  std::set<std::string> hosts;
  for (int r = 0; r < size; ++r) {
    hosts.emplace(&all_names[static_cast<std::size_t>(r) * kHostnameBytes]);
  }

  int ok = 1;
  if (sum != expected_sum) {
    std::fprintf(stderr, "dtrain: rank %d: allreduce sum is %lld, expected %lld\n", rank, sum,
                 expected_sum);
    ok = 0;
  }
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);

  if (rank == 0) {
    std::string host_list;
    for (const auto& host : hosts) {
      host_list += (host_list.empty() ? "" : ",") + host;
    }
    std::printf("allreduce sum %lld over %d ranks on %zu hosts: %s\n", sum, size, hosts.size(),
                host_list.c_str());
    if (size != expected_ranks) {
      std::fprintf(stderr, "dtrain: world size is %d, expected %d (--ranks)\n", size,
                   expected_ranks);
      all_ok = 0;
    }
    if (static_cast<int>(hosts.size()) != expected_hosts) {
      std::fprintf(stderr, "dtrain: ranks ran on %zu distinct hosts (%s), expected %d (--hosts)\n",
                   hosts.size(), host_list.c_str(), expected_hosts);
      all_ok = 0;
    }
  }
  MPI_Bcast(&all_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return all_ok != 0 ? 0 : 1;
}
