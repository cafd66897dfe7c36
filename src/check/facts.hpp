// SPDX-License-Identifier: Apache-2.0
#pragma once
// What one rank of dtrain-check observed about itself and its node, as plain data, and its
// JSON form (how ranks send it to rank 0). Pure.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/fingerprint.hpp"

namespace dtrain::check {

struct GpuFacts {
  std::string bus_id;
  std::string model;
  bool operator==(const GpuFacts&) const = default;
};

// The result of checking, before this step bound anything, that an address:port is free.
struct PortFacts {
  std::string role;      // "endpoint" or "master"
  std::string endpoint;  // "addr:port" as exported
  bool in_use = false;
  // The listener belongs to another user than the rank's (from /proc/net/tcp*): holder_uid.
  bool held_by_other_user = false;
  std::uint32_t holder_uid = 0;
  bool operator==(const PortFacts&) const = default;
};

struct RankFacts {
  int rank = -1;
  int local_rank = -1;
  std::string host;
  bool plugin = false;  // the plugin's DTRAIN_* variables were present
  // NCCL_*, UCX_* and CUDA_* variables plus the plugin's binding variables that are set.
  std::map<std::string, std::string> environment;
  std::string cpus_allowed;             // the task's real affinity, cpulist form
  std::vector<PortFacts> ports;         // checked before the preflight listens
  std::string listen_endpoint;          // where the preflight listened
  int listen_errno = 0;                 // 0: listening
  std::vector<std::string> interfaces;  // the node's network interfaces
  bootstrap::Fingerprint fingerprint;
  // Node-level facts, filled by the node's first rank only.
  std::optional<std::vector<GpuFacts>> gpus;  // nullopt on other ranks
  std::string topology_error;                 // why GPUs are unknown, when they are
};

nlohmann::json to_json(const RankFacts& facts);
// Throws dtrain::Error(kMismatch) naming `from_rank` when the JSON is not RankFacts.
RankFacts rank_facts_from_json(const nlohmann::json& json, int from_rank);

}  // namespace dtrain::check
