// SPDX-License-Identifier: Apache-2.0
#pragma once
// A set of ranks as sorted, disjoint intervals, so that "every rank but these few" costs as
// much as the few. Printed like format_rank_set (fingerprint.hpp): "0-2,5,7-8".

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace dtrain::bootstrap {

class RankSet {
 public:
  RankSet() = default;
  static RankSet all(int size);  // 0..size-1
  static RankSet of(std::vector<int> ranks);

  void insert(int rank);
  bool contains(int rank) const;
  bool empty() const { return intervals_.empty(); }
  std::size_t count() const;
  int first() const;  // the lowest rank; the set must not be empty
  RankSet minus(const RankSet& other) const;
  RankSet united(const RankSet& other) const;
  const std::vector<std::pair<int, int>>& intervals() const { return intervals_; }  // closed
  std::string format() const;
  bool operator==(const RankSet&) const = default;

 private:
  void normalise();
  std::vector<std::pair<int, int>> intervals_;
};

}  // namespace dtrain::bootstrap
