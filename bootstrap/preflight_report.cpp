// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/preflight_report.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <set>

#include "bootstrap/endpoints.hpp"
#include "bootstrap/fingerprint.hpp"
#include "bootstrap/peers.hpp"

namespace dtrain::bootstrap {

namespace {

std::string errno_text(int error) {
  if (error == ETIMEDOUT) return "no answer before the deadline (connection timed out)";
  std::string text = std::strerror(error);
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

std::string port_of(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  return colon == std::string::npos ? endpoint : endpoint.substr(colon + 1);
}

}  // namespace

std::string describe_listen_failure(const RankRecord& rank) {
  std::string message = "rank " + std::to_string(rank.mpi.rank) + " on " + rank.hostname +
                        " cannot listen on " + rank.listen_endpoint + ": " +
                        errno_text(rank.listen_errno);
  const std::string port = port_of(rank.listen_endpoint);
  if (rank.listen_errno == EADDRINUSE) {
    message += " — another process holds the port; find it with \"ss -ltnp 'sport = :" + port +
               "'\" on " + rank.hostname +
               ", stop it or let Slurm reserve ports for the step (MpiParams=ports=A-B)";
  } else if (rank.listen_errno == EADDRNOTAVAIL) {
    message += " — the address is not configured on " + rank.hostname +
               "; check how the node's name resolves there";
  }
  return message;
}

std::string describe_probe_failure(const RankRecord& source, const RankRecord& target, int error) {
  const std::string& endpoint = target.listen_endpoint;
  return "rank " + std::to_string(source.mpi.rank) + " on " + source.hostname +
         " cannot reach rank " + std::to_string(target.mpi.rank) + " at " + target.hostname + ":" +
         port_of(endpoint) + " (" + endpoint + "): " + errno_text(error);
}

std::string describe_impostor(const RankRecord& source, const RankRecord& target) {
  return "rank " + std::to_string(source.mpi.rank) + " on " + source.hostname + " reached rank " +
         std::to_string(target.mpi.rank) + "'s endpoint " + target.hostname + ":" +
         port_of(target.listen_endpoint) + " (" + target.listen_endpoint + "), but rank " +
         std::to_string(target.mpi.rank) +
         " could not listen there: another process answers on that port";
}

std::optional<std::string> suspect_node(const std::vector<FailedLink>& links) {
  std::optional<std::set<std::string>> common;
  for (const auto& link : links) {
    if (link.from == link.to) continue;
    const std::set<std::string> ends = {link.from, link.to};
    if (!common) {
      common = ends;
      continue;
    }
    std::set<std::string> both;
    std::set_intersection(common->begin(), common->end(), ends.begin(), ends.end(),
                          std::inserter(both, both.begin()));
    common = std::move(both);
  }
  if (!common || common->size() != 1) return std::nullopt;
  return *common->begin();
}

std::string describe_suspect(const std::vector<FailedLink>& links) {
  std::set<std::string> others;
  std::size_t between_nodes = 0;
  for (const auto& link : links) {
    if (link.from != link.to) ++between_nodes;
  }
  if (between_nodes == 0) return "";
  if (const auto suspect = suspect_node(links)) {
    for (const auto& link : links) {
      if (link.from != link.to) others.insert(link.from == *suspect ? link.to : link.from);
    }
    std::string list;
    for (const auto& other : others) list += (list.empty() ? "" : ", ") + other;
    return "suspect node: " + *suspect + " (an end of all " + std::to_string(between_nodes) +
           " failed connections between nodes, with " + list +
           "); exclude it (srun --exclude=" + *suspect + ") and tell the site";
  }
  return "no suspect node: no single node is an end of all " + std::to_string(between_nodes) +
         " failed connections between nodes";
}

std::string describe_absent_ranks(const std::vector<std::string>& endpoints,
                                  const std::vector<ProbeOutcome>& outcomes) {
  std::vector<int> absent;
  std::string where;
  constexpr std::size_t kNamedEndpoints = 8;
  for (const auto& outcome : outcomes) {
    if (outcome.error == 0) continue;
    absent.push_back(outcome.target);
    if (absent.size() <= kNamedEndpoints) {
      where += (where.empty() ? "" : ", ") + endpoints.at(static_cast<std::size_t>(outcome.target));
    }
  }
  if (absent.empty()) return {};
  if (absent.size() > kNamedEndpoints) where += ", ...";
  return (absent.size() == 1 ? "rank " : "ranks ") + format_rank_set(absent) + " (" + where +
         (absent.size() == 1 ? ") does" : ") do") +
         " not answer on the plugin's endpoint: died, or never reached dtrain's bootstrap";
}

std::vector<std::string> describe_preflight(
    const std::vector<RankRecord>& records,
    const std::vector<std::vector<ProbeOutcome>>& outcomes) {
  std::vector<std::string> failures;
  for (const auto& record : records) {
    if (record.listen_errno != 0) failures.push_back(describe_listen_failure(record));
  }
  for (std::size_t source = 0; source < outcomes.size(); ++source) {
    for (const auto& outcome : outcomes[source]) {
      const RankRecord& from = records.at(source);
      const RankRecord& to = records.at(static_cast<std::size_t>(outcome.target));
      if (outcome.error != 0) {
        failures.push_back(describe_probe_failure(from, to, outcome.error));
      } else if (to.listen_errno != 0) {
        failures.push_back(describe_impostor(from, to));
      }
    }
  }
  return failures;
}

}  // namespace dtrain::bootstrap
