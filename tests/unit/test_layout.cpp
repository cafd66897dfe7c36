// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/hostlist.hpp"
#include "core/layout.hpp"

using dtrain::Error;
using dtrain::ErrorKind;
using namespace dtrain::core;

namespace {

StepLayout layout_of(const std::string& nodes, const std::string& tpn, const std::string& dist,
                     std::uint32_t nnodes, std::uint32_t ntasks, const std::string& arb = "") {
  StepSpec spec;
  spec.nodelist = nodes;
  spec.tasks_per_node = tpn;
  spec.distribution = parse_distribution(dist);
  spec.nnodes = nnodes;
  spec.ntasks = ntasks;
  spec.arbitrary_hosts = arb;
  return derive_layout(spec);
}

using Ranks = std::vector<std::uint32_t>;

ErrorKind kind_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no dtrain::Error thrown";
  return ErrorKind::kInternal;
}

}  // namespace

TEST(Hostlist, ExpandsWithPaddingAndSeveralGroups) {
  EXPECT_EQ(expand_hostlist("node[001-003]", 10),
            (std::vector<std::string>{"node001", "node002", "node003"}));
  EXPECT_EQ(expand_hostlist("rack[1-2]-n[01-02]", 10),
            (std::vector<std::string>{"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}));
  EXPECT_EQ(expand_hostlist("b,a,c", 10), (std::vector<std::string>{"b", "a", "c"}));
}

TEST(Hostlist, RejectsGarbage) {
  for (const char* bad : {"", "node[1-", "node[3-1]", "node]1[", "a b", "node[1-2]\n", ",,"}) {
    EXPECT_EQ(kind_of([&] { expand_hostlist(bad, 100); }), ErrorKind::kInvalidInput) << bad;
  }
}

TEST(Hostlist, RejectsMoreHostsThanExpected) {
  EXPECT_THROW(expand_hostlist("n[1-100000]", 8), Error);
}

TEST(TasksPerNode, ExpandsRepeats) {
  EXPECT_EQ(parse_tasks_per_node("4,2,1(x2)", 4), (Ranks{4, 2, 1, 1}));
  EXPECT_EQ(parse_tasks_per_node("8(x3)", 3), (Ranks{8, 8, 8}));
  EXPECT_EQ(parse_tasks_per_node("1", 1), (Ranks{1}));
}

TEST(TasksPerNode, RejectsEveryBadInputClass) {
  const std::vector<std::pair<std::string, std::uint32_t>> bad = {{"", 1},
                                                                  {"4,", 2},
                                                                  {"(x2)", 2},
                                                                  {"1(x0)", 1},
                                                                  {"1(x)", 1},
                                                                  {"1(y2)", 2},
                                                                  {"1(x2", 2},
                                                                  {"-1", 1},
                                                                  {"0", 1},
                                                                  {"1,1", 1},
                                                                  {"1(x2)", 3},
                                                                  {"99999999999999999999", 1},
                                                                  {"1(x4294967296)", 1},
                                                                  {"1(x1000000000)", 4},
                                                                  {"abc", 1},
                                                                  {"2 ,2", 2}};
  for (const auto& entry : bad) {
    const auto& text = entry.first;
    EXPECT_EQ(kind_of([&] { parse_tasks_per_node(text, entry.second); }), ErrorKind::kInvalidInput)
        << text;
  }
}

TEST(TasksPerNode, RejectsAMegabyteString) {
  const std::string huge(1 << 20 | 1, '1');
  EXPECT_EQ(kind_of([&] { parse_tasks_per_node(huge, 1); }), ErrorKind::kInvalidInput);
  std::string many;
  for (int i = 0; i < 200000; ++i) many += "1,";
  many += "1";
  EXPECT_EQ(kind_of([&] { parse_tasks_per_node(many, 4); }), ErrorKind::kInvalidInput);
}

TEST(Distribution, ParsesSlurmSpellings) {
  EXPECT_EQ(parse_distribution("block").kind, DistributionKind::kBlock);
  EXPECT_EQ(parse_distribution("(null)").kind, DistributionKind::kBlock);
  EXPECT_EQ(parse_distribution("").kind, DistributionKind::kBlock);
  EXPECT_EQ(parse_distribution("cyclic:block").kind, DistributionKind::kCyclic);
  EXPECT_EQ(parse_distribution("block,Pack").kind, DistributionKind::kBlock);
  EXPECT_EQ(parse_distribution("pack").kind, DistributionKind::kBlock);
  EXPECT_EQ(parse_distribution("nopack").kind, DistributionKind::kBlock);
  EXPECT_EQ(parse_distribution("cyclic,pack").kind, DistributionKind::kCyclic);
  EXPECT_THROW(parse_distribution("packed"), Error);
  EXPECT_EQ(parse_distribution("arbitrary").kind, DistributionKind::kArbitrary);
  EXPECT_EQ(parse_distribution("plane=4").plane_size, 4u);
  EXPECT_EQ(parse_distribution("plane", "2").plane_size, 2u);
  EXPECT_THROW(parse_distribution("plane"), Error);
  EXPECT_THROW(parse_distribution("plane=0"), Error);
  EXPECT_THROW(parse_distribution("plane=-2"), Error);
  EXPECT_THROW(parse_distribution("planet=2"), Error);
  EXPECT_THROW(parse_distribution("spiral"), Error);
}

// `srun -N4 -n8` on this machine's Slurm: 4,2,1(x2) with block placement.
TEST(Layout, BlockUneven) {
  const auto l = layout_of("node[1-4]", "4,2,1(x2)", "block", 4, 8);
  EXPECT_EQ(l.hosts, (std::vector<std::string>{"node1", "node2", "node3", "node4"}));
  EXPECT_EQ(l.node_ranks[0], (Ranks{0, 1, 2, 3}));
  EXPECT_EQ(l.node_ranks[1], (Ranks{4, 5}));
  EXPECT_EQ(l.node_ranks[2], (Ranks{6}));
  EXPECT_EQ(l.node_ranks[3], (Ranks{7}));
  EXPECT_EQ(l.ranks[5].node, 1u);
  EXPECT_EQ(l.ranks[5].local_rank, 1u);
  EXPECT_EQ(l.local_world_size(0), 4u);
}

// `srun -N3 -n5 -m cyclic` put global ranks 0,3,4 on the first node.
TEST(Layout, CyclicUneven) {
  const auto l = layout_of("node[1-3]", "3,1(x2)", "cyclic", 3, 5);
  EXPECT_EQ(l.node_ranks[0], (Ranks{0, 3, 4}));
  EXPECT_EQ(l.node_ranks[1], (Ranks{1}));
  EXPECT_EQ(l.node_ranks[2], (Ranks{2}));
  EXPECT_EQ(l.ranks[4].local_rank, 2u);
}

TEST(Layout, CyclicEven) {
  const auto l = layout_of("n[1-2]", "3(x2)", "cyclic:cyclic", 2, 6);
  EXPECT_EQ(l.node_ranks[0], (Ranks{0, 2, 4}));
  EXPECT_EQ(l.node_ranks[1], (Ranks{1, 3, 5}));
}

TEST(Layout, PlaneUneven) {
  // plane=2 over counts 4,3,1: round 1 gives 0-1,2-3,4; round 2 gives 5-6,7.
  const auto l = layout_of("n[1-3]", "4,3,1", "plane=2", 3, 8);
  EXPECT_EQ(l.node_ranks[0], (Ranks{0, 1, 5, 6}));
  EXPECT_EQ(l.node_ranks[1], (Ranks{2, 3, 7}));
  EXPECT_EQ(l.node_ranks[2], (Ranks{4}));
}

TEST(Layout, PlaneLargerThanCountsIsBlock) {
  const auto plane = layout_of("n[1-3]", "2,3,1", "plane=8", 3, 6);
  const auto block = layout_of("n[1-3]", "2,3,1", "block", 3, 6);
  EXPECT_EQ(plane.node_ranks, block.node_ranks);
}

TEST(Layout, Arbitrary) {
  const auto l = layout_of("n[1-2]", "2,3", "arbitrary", 2, 5, "n2,n1,n2,n2,n1");
  EXPECT_EQ(l.node_ranks[0], (Ranks{1, 4}));
  EXPECT_EQ(l.node_ranks[1], (Ranks{0, 2, 3}));
  EXPECT_THROW(layout_of("n[1-2]", "2,3", "arbitrary", 2, 5), Error);
  EXPECT_THROW(layout_of("n[1-2]", "2,3", "arbitrary", 2, 5, "n2,n1,n2,n2,n3"), Error);
  EXPECT_THROW(layout_of("n[1-2]", "2,3", "arbitrary", 2, 5, "n2,n1,n1,n2,n1"), Error);
}

TEST(Layout, EveryRankPlacedExactlyOnce) {
  for (const char* dist : {"block", "cyclic", "plane=3"}) {
    const auto l = layout_of("h[01-05]", "7,1,4,2(x2)", dist, 5, 16);
    std::vector<int> seen(16, 0);
    for (std::uint32_t n = 0; n < 5; ++n) {
      for (std::uint32_t local = 0; local < l.node_ranks[n].size(); ++local) {
        const auto r = l.node_ranks[n][local];
        ++seen[r];
        EXPECT_EQ(l.ranks[r].node, n);
        EXPECT_EQ(l.ranks[r].local_rank, local);
      }
    }
    for (int s : seen) EXPECT_EQ(s, 1) << dist;
  }
}

TEST(Layout, RejectsInconsistentCounts) {
  EXPECT_EQ(kind_of([] { layout_of("node[1-4]", "4,2,1(x2)", "block", 4, 9); }),
            ErrorKind::kInvalidInput);
  EXPECT_EQ(kind_of([] { layout_of("node[1-3]", "4,2,1(x2)", "block", 4, 8); }),
            ErrorKind::kInvalidInput);
  EXPECT_EQ(kind_of([] { layout_of("node[1-4]", "4,2,1(x2)", "block", 3, 8); }),
            ErrorKind::kInvalidInput);
  EXPECT_EQ(kind_of([] { layout_of("node[1-4]", "2(x4)", "block", 0, 8); }),
            ErrorKind::kInvalidInput);
  EXPECT_EQ(kind_of([] { layout_of("node[1-4]", "2(x4)", "block", 4, 0); }),
            ErrorKind::kInvalidInput);
  EXPECT_EQ(kind_of([] { layout_of("", "2(x4)", "block", 4, 8); }), ErrorKind::kInvalidInput);
  EXPECT_EQ(kind_of([] { layout_of(std::string(1 << 20, 'x') + "y", "1", "block", 1, 1); }),
            ErrorKind::kInvalidInput);
}

TEST(LocalRanks, AcceptsMatchAndNamesBothListsOnMismatch) {
  const auto l = layout_of("node[1-3]", "3,1(x2)", "cyclic", 3, 5);
  EXPECT_NO_THROW(check_local_ranks(l, 0, {0, 3, 4}));
  try {
    check_local_ranks(l, 0, {0, 1, 2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kMismatch);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[0,1,2]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[0,3,4]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("node1"), std::string::npos) << msg;
  }
  EXPECT_EQ(kind_of([&] { check_local_ranks(l, 0, {0, 3}); }), ErrorKind::kMismatch);
}
