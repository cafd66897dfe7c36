// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "bootstrap/fingerprint.hpp"

namespace {

using namespace dtrain::bootstrap;

Fingerprint sample() {
  return {"3f2a9c0d11e4b7a5", "0.1.0", "Open MPI v4.1.4", "2.28.9", "13.0", "none", "none"};
}

TEST(Fingerprint, RankSetsAreCompressedRanges) {
  EXPECT_EQ(format_rank_set({}), "");
  EXPECT_EQ(format_rank_set({3}), "3");
  EXPECT_EQ(format_rank_set({0, 1, 2, 4, 6, 7}), "0-2,4,6-7");
}

TEST(Fingerprint, NoTableWhenAllRanksAgree) {
  EXPECT_EQ(fingerprint_mismatch_table(std::vector<Fingerprint>(8, sample())), "");
}

TEST(Fingerprint, TableNamesTheFieldTheValuesAndTheRanks) {
  std::vector<Fingerprint> ranks(8, sample());
  ranks[3].executable_hash = "91c0e2ab7730f1d2";
  ranks[5].mpi_library = "MPICH 4.1";
  ranks[6].mpi_library = "MPICH 4.1";
  const std::string table = fingerprint_mismatch_table(ranks);
  EXPECT_EQ(table,
            "field            value             ranks\n"
            "executable hash  3f2a9c0d11e4b7a5  0-2,4-7\n"
            "                 91c0e2ab7730f1d2  3\n"
            "MPI library      Open MPI v4.1.4   0-4,7\n"
            "                 MPICH 4.1         5-6\n");
}

}  // namespace
