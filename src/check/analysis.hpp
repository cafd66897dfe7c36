// SPDX-License-Identifier: Apache-2.0
#pragma once
// Turns every rank's facts and the preflight outcomes into dtrain-check's report: per-node
// summary, environment comparison and findings. Pure: plain data in, plain data out.

#include <optional>
#include <string>
#include <vector>

#include "bootstrap/fingerprint.hpp"
#include "bootstrap/preflight_report.hpp"
#include "check/facts.hpp"
#include "check/findings.hpp"

namespace dtrain::check {

struct CheckInput {
  std::vector<RankFacts> ranks;  // index = rank
  bool preflight_ran = false;
  std::vector<std::vector<bootstrap::ProbeOutcome>> preflight;  // by source rank
  bool allow_mismatch = false;
};

struct NodeReport {
  std::string host;
  std::vector<int> ranks;                     // ascending
  std::optional<std::vector<GpuFacts>> gpus;  // nullopt: unknown
  std::string topology_error;
};

// One value of a variable and who has it ("unset" when `set` is false).
struct EnvValue {
  bool set = false;
  std::string value;
  std::vector<int> ranks;
  std::vector<std::string> nodes;  // in node order
};

struct EnvVariableReport {
  std::string name;
  bool per_task = false;  // a binding variable the plugin sets per task: expected to differ
  std::vector<EnvValue> values;
};

struct CheckReport {
  std::vector<NodeReport> nodes;  // in order of their first rank
  std::vector<RankFacts> ranks;
  bool plugin_in_effect = false;       // every rank had the plugin's variables
  bootstrap::Fingerprint fingerprint;  // rank 0's
  std::string fingerprint_table;       // "" when every rank agrees
  bool preflight_ran = false;
  std::size_t probes = 0;
  std::vector<std::string> preflight_failures;
  std::vector<EnvVariableReport> environment;  // NCCL_*, UCX_*, CUDA_*, by name
  std::vector<Finding> findings;

  bool healthy() const;     // no finding of severity problem
  int exit_status() const;  // 0 healthy, 1 problems found
};

// The variables dtrain-check reports and compares: prefixes and the plugin's binding names.
bool is_reported_variable(const std::string& name);

CheckReport analyse(const CheckInput& input);

}  // namespace dtrain::check
