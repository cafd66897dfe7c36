// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/rank_set.hpp"

#include <algorithm>

namespace dtrain::bootstrap {

RankSet RankSet::all(int size) {
  RankSet set;
  if (size > 0) set.intervals_.push_back({0, size - 1});
  return set;
}

RankSet RankSet::of(std::vector<int> ranks) {
  RankSet set;
  for (int rank : ranks) set.intervals_.push_back({rank, rank});
  set.normalise();
  return set;
}

void RankSet::normalise() {
  std::sort(intervals_.begin(), intervals_.end());
  std::vector<std::pair<int, int>> merged;
  for (const auto& interval : intervals_) {
    if (!merged.empty() && interval.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, interval.second);
    } else {
      merged.push_back(interval);
    }
  }
  intervals_ = std::move(merged);
}

void RankSet::insert(int rank) {
  // Ranks mostly arrive in increasing order: extend or append without sorting.
  if (intervals_.empty() || rank > intervals_.back().second + 1) {
    intervals_.push_back({rank, rank});
  } else if (rank == intervals_.back().second + 1) {
    ++intervals_.back().second;
  } else if (!contains(rank)) {
    intervals_.push_back({rank, rank});
    normalise();
  }
}

bool RankSet::contains(int rank) const {
  const auto it = std::upper_bound(intervals_.begin(), intervals_.end(), std::pair{rank, rank},
                                   [](const auto& a, const auto& b) { return a.first < b.first; });
  if (it == intervals_.begin()) return false;
  return std::prev(it)->second >= rank;
}

std::size_t RankSet::count() const {
  std::size_t total = 0;
  for (const auto& [low, high] : intervals_) total += static_cast<std::size_t>(high - low + 1);
  return total;
}

int RankSet::first() const {
  return intervals_.front().first;
}

RankSet RankSet::minus(const RankSet& other) const {
  RankSet result;
  auto cut = other.intervals_.begin();
  for (auto [low, high] : intervals_) {
    while (cut != other.intervals_.end() && cut->second < low) ++cut;
    auto c = cut;
    while (low <= high) {
      if (c == other.intervals_.end() || c->first > high) {
        result.intervals_.push_back({low, high});
        break;
      }
      if (c->first > low) result.intervals_.push_back({low, c->first - 1});
      low = c->second + 1;
      ++c;
    }
  }
  return result;
}

RankSet RankSet::united(const RankSet& other) const {
  RankSet result;
  result.intervals_ = intervals_;
  result.intervals_.insert(result.intervals_.end(), other.intervals_.begin(),
                           other.intervals_.end());
  result.normalise();
  return result;
}

std::string RankSet::format() const {
  std::string out;
  for (const auto& [low, high] : intervals_) {
    if (!out.empty()) out += ',';
    out += std::to_string(low);
    if (high > low) out += '-' + std::to_string(high);
  }
  return out;
}

}  // namespace dtrain::bootstrap
