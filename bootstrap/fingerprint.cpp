// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/fingerprint.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace dtrain::bootstrap {

const std::vector<FingerprintField>& fingerprint_fields() {
  static const std::vector<FingerprintField> fields = {
      {"executable hash", &Fingerprint::executable_hash},
      {"dtrain version", &Fingerprint::dtrain_version},
      {"MPI library", &Fingerprint::mpi_library},
      {"NCCL version", &Fingerprint::nccl_version},
      {"CUDA runtime", &Fingerprint::cuda_runtime},
      {"CUDA driver", &Fingerprint::cuda_driver},
      {"GPU model", &Fingerprint::gpu_model},
  };
  return fields;
}

std::string format_rank_set(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ranks[i]);
    if (j > i) out += '-' + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

namespace {

std::string pad(std::string text, std::size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

}  // namespace

std::string fingerprint_mismatch_table(const std::vector<Fingerprint>& by_rank) {
  std::vector<std::pair<Fingerprint, RankSet>> groups;
  for (std::size_t rank = 0; rank < by_rank.size(); ++rank) {
    groups.push_back({by_rank[rank], RankSet::of({static_cast<int>(rank)})});
  }
  return fingerprint_mismatch_table(groups);
}

std::string fingerprint_mismatch_table(const std::vector<std::pair<Fingerprint, RankSet>>& groups) {
  struct Row {
    std::string label, value, ranks;
  };
  std::vector<Row> rows;
  for (const auto& field : fingerprint_fields()) {
    // Values in order of their lowest rank, so rank 0's value comes first.
    std::map<std::string, RankSet> holders;
    for (const auto& [fingerprint, ranks] : groups) {
      if (ranks.empty()) continue;
      auto& set = holders[fingerprint.*field.member];
      if (ranks.intervals().size() == 1 && ranks.count() == 1) {
        set.insert(ranks.first());
      } else {
        set = set.united(ranks);
      }
    }
    if (holders.size() < 2) continue;
    std::vector<std::pair<std::string, RankSet>> order(holders.begin(), holders.end());
    std::sort(order.begin(), order.end(),
              [](const auto& a, const auto& b) { return a.second.first() < b.second.first(); });
    for (std::size_t i = 0; i < order.size(); ++i) {
      rows.push_back({i == 0 ? field.label : "", order[i].first, order[i].second.format()});
    }
  }
  if (rows.empty()) return {};
  std::size_t label_width = 5, value_width = 5;
  for (const auto& row : rows) {
    label_width = std::max(label_width, row.label.size());
    value_width = std::max(value_width, row.value.size());
  }
  std::string table = pad("field", label_width) + "  " + pad("value", value_width) + "  ranks\n";
  for (const auto& row : rows) {
    table +=
        pad(row.label, label_width) + "  " + pad(row.value, value_width) + "  " + row.ranks + "\n";
  }
  return table;
}

}  // namespace dtrain::bootstrap
