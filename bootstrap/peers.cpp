// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/peers.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"

namespace dtrain::bootstrap {

std::vector<int> preflight_peers(int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw Error(ErrorKind::kInternal, "preflight_peers: rank " + std::to_string(rank) +
                                          " is outside a world of " + std::to_string(size));
  }
  std::vector<int> peers;
  for (long stride = 1; stride < size; stride *= 2) {
    peers.push_back(static_cast<int>((rank + stride) % size));
    peers.push_back(static_cast<int>((rank - stride % size + size) % size));
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  std::erase(peers, rank);
  return peers;
}

}  // namespace dtrain::bootstrap
