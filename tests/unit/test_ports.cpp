// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <bitset>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/ports.hpp"

using dtrain::Error;
using namespace dtrain::core;

namespace {

std::vector<std::uint16_t> ports_of(const StepPorts& p) {
  auto all = p.endpoint_ports;
  all.push_back(p.master);
  return all;
}

// Marks every port of every step in `steps` and reports the first port two steps share.
struct Occupancy {
  std::bitset<65536> used;
  std::string first_clash;

  void add(const StepPorts& p, const std::string& who) {
    for (auto port : ports_of(p)) {
      if (used.test(port) && first_clash.empty()) {
        first_clash = who + " reuses port " + std::to_string(port);
      }
      used.set(port);
    }
  }
};

// The configurations the guarantees are checked on.
struct Scheme {
  PortRange range;
  std::uint32_t block;
};
// The default, the smallest row (64 ports, so 63 colours) at three block sizes, an odd row just
// above it, an even row with three job classes, and a narrow range with an odd row.
const Scheme kSchemes[] = {{{20000, 32767}, 32},
                           {{20000, 24095}, 64},
                           {{40000, 40127}, 2},
                           {{20000, 32767}, 199},
                           {{30000, 30000 + 65 * 32 - 1}, 32},
                           {{20000, 24095}, 16},
                           {{30000, 30999}, 9}};

}  // namespace

TEST(Ports, DerivedPortsAreDeterministicInRangeAndSeparateFromTheMaster) {
  const PortRange range{20000, 32767};
  const auto a = plan_ports(range, 32, 1234, 1, 8, "");
  EXPECT_EQ(a.endpoint_ports, plan_ports(range, 32, 1234, 1, 8, "").endpoint_ports);
  EXPECT_EQ(a.source, PortSource::kDerived);
  ASSERT_EQ(a.endpoint_ports.size(), 8u);
  auto all = ports_of(a);
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
  EXPECT_GE(all.front(), 20000);
  EXPECT_LE(all.back(), 32767);
}

TEST(Ports, DefaultsGive399ColoursAndSixJobClasses) {
  // README, the man page and dtrain.conf quote these figures.
  EXPECT_EQ(derived_port_colours(PortRange{20000, 32767}, 32), 399u);
  EXPECT_EQ(derived_port_job_classes(PortRange{20000, 32767}, 32), 6u);
  // An even row width leaves its last port unused: the colours must be odd.
  EXPECT_EQ(derived_port_colours(PortRange{20000, 24095}, 64), 63u);
  EXPECT_EQ(derived_port_job_classes(PortRange{20000, 24095}, 64), 1u);
  EXPECT_EQ(derived_port_colours(PortRange{40000, 40127}, 2), 63u);
  EXPECT_EQ(derived_port_colours(PortRange{20000, 20000 + 65 * 32 - 1}, 32), 65u);
  EXPECT_EQ(derived_port_colours(PortRange{20000, 20000 + 64 * 32 - 2}, 32), 0u);
  EXPECT_EQ(derived_port_job_classes(PortRange{20000, 20000 + 64 * 32 - 2}, 32), 0u);
}

namespace {

// The ports of job j's step s with `tasks` tasks on the busiest node.
std::vector<std::uint16_t> step_ports(const Scheme& scheme, std::uint32_t job, std::uint32_t step,
                                      std::uint32_t tasks = 1) {
  return ports_of(plan_ports(scheme.range, scheme.block, job, step, tasks, ""));
}

bool share_a_port(std::vector<std::uint16_t> a, std::vector<std::uint16_t> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  std::vector<std::uint16_t> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  return !both.empty();
}

// (G0) of ports.hpp, the rule every guarantee follows from: (j, s) and (j', s') collide if and
// only if 64 (j - j') + (s - s') = 0 (mod S), computed here on exact integers.
bool collide_by_rule(std::uint32_t colours, std::uint32_t j, std::uint32_t s, std::uint32_t j2,
                     std::uint32_t s2) {
  const std::int64_t d =
      64 * (static_cast<std::int64_t>(j) - j2) + (static_cast<std::int64_t>(s) - s2);
  return d % static_cast<std::int64_t>(colours) == 0;
}

}  // namespace

// (G0), checked on the ports themselves: for every job distance up to 2 S and step distance up
// to 130 around three origins (one next to the largest job id, where 64 * job needs 38 bits), two
// steps share a port exactly when the rule says so. Task counts do not matter (the next tests).
TEST(Ports, TwoStepsShareAPortExactlyWhenTheRuleSaysSo) {
  for (const auto& scheme : kSchemes) {
    const auto colours = derived_port_colours(scheme.range, scheme.block);
    ASSERT_GE(colours, 63u);
    ASSERT_EQ(colours % 2, 1u);
    const std::uint32_t max_job = 4294967295u;
    for (const std::uint32_t origin_job : {0u, 1000u, max_job - 2 * colours}) {
      const std::uint32_t origin_step = 200;
      const auto origin = step_ports(scheme, origin_job, origin_step);
      for (std::uint32_t job = origin_job; job - origin_job <= 2 * colours; ++job) {
        for (std::uint32_t step = origin_step - 130; step <= origin_step + 130; ++step) {
          if (job == origin_job && step == origin_step) continue;
          const bool shared = share_a_port(origin, step_ports(scheme, job, step));
          ASSERT_EQ(shared, collide_by_rule(colours, job, step, origin_job, origin_step))
              << "range " << scheme.range.first << "-" << scheme.range.last << " block "
              << scheme.block << ": job " << origin_job << " step " << origin_step << " and job "
              << job << " step " << step;
        }
      }
    }
  }
}

// (G1) and (G2) together, exhaustively over every task count the block allows: steps of D
// consecutive jobs whose ids lie within 64 of each other (within S when S = 63) never share a
// port, and each step stays inside the range. Task counts may differ between steps because a
// step's ports for n tasks are a subset of its ports for n + 1 (checked too), so disjoint sets at
// one count per step imply disjoint sets at any mix.
TEST(Ports, ConcurrentStepsAndNearbyJobsNeverShareAPortForAnyTaskCount) {
  for (const auto& scheme : kSchemes) {
    const auto classes = derived_port_job_classes(scheme.range, scheme.block);
    const auto step_window =
        std::min(kDerivedPortStepClasses, derived_port_colours(scheme.range, scheme.block));
    ASSERT_GE(classes, 1u);
    for (std::uint32_t first_job : {0u, 1u, 301u, 4093u, 4294967295u - classes}) {
      for (std::uint32_t tasks = 1; tasks < scheme.block; ++tasks) {
        Occupancy occupancy;
        for (std::uint32_t job = first_job; job - first_job < classes; ++job) {
          for (std::uint32_t step = 7; step < 7 + step_window; ++step) {
            const auto p = plan_ports(scheme.range, scheme.block, job, step, tasks, "");
            for (auto port : ports_of(p)) {
              ASSERT_GE(port, scheme.range.first);
              ASSERT_LE(port, scheme.range.last);
            }
            if (tasks + 1 < scheme.block) {
              const auto wider = step_ports(scheme, job, step, tasks + 1);
              for (auto port : ports_of(p)) {
                ASSERT_NE(std::find(wider.begin(), wider.end(), port), wider.end())
                    << "job " << job << " step " << step << " tasks " << tasks;
              }
            }
            occupancy.add(p, "job " + std::to_string(job) + " step " + std::to_string(step) +
                                 " with " + std::to_string(tasks) + " tasks per node");
          }
        }
        ASSERT_EQ(occupancy.first_clash, "") << "range " << scheme.range.first << "-"
                                             << scheme.range.last << " block " << scheme.block;
      }
    }
  }
}

// (G1): any S consecutive steps of one job are pairwise apart, at every task count; step S
// later takes the first one's ports again.
TEST(Ports, AnySConsecutiveStepsOfAJobNeverShareAPort) {
  for (const auto& scheme : kSchemes) {
    const auto colours = derived_port_colours(scheme.range, scheme.block);
    for (std::uint32_t tasks : {1u, scheme.block / 2, scheme.block - 1}) {
      Occupancy occupancy;
      for (std::uint32_t step = 5; step < 5 + colours; ++step) {
        occupancy.add(plan_ports(scheme.range, scheme.block, 4242, step, tasks, ""),
                      "step " + std::to_string(step));
      }
      ASSERT_EQ(occupancy.first_clash, "") << "block " << scheme.block << " tasks " << tasks;
    }
    EXPECT_TRUE(share_a_port(step_ports(scheme, 4242, 5), step_ports(scheme, 4242, 5 + colours)));
  }
}

// (G3): any S consecutive job ids at one step id never share a port, at every task count, across
// the largest job id too; job ids S apart do.
TEST(Ports, AnySConsecutiveJobsAtEqualStepIdsNeverShareAPort) {
  for (const auto& scheme : kSchemes) {
    const auto colours = derived_port_colours(scheme.range, scheme.block);
    for (std::uint32_t first_job : {1u, 67043328u - 100u, 4294967295u - colours + 1}) {
      for (std::uint32_t step : {0u, 1u, 63u, 64u, 4000u}) {
        for (std::uint32_t tasks : {1u, scheme.block - 1}) {
          Occupancy occupancy;
          for (std::uint32_t k = 0; k < colours; ++k) {
            occupancy.add(plan_ports(scheme.range, scheme.block, first_job + k, step, tasks, ""),
                          "job " + std::to_string(first_job + k));
          }
          ASSERT_EQ(occupancy.first_clash, "")
              << "block " << scheme.block << " step " << step << " tasks " << tasks;
        }
      }
    }
    EXPECT_TRUE(share_a_port(step_ports(scheme, 1000, 3), step_ports(scheme, 1000 + colours, 3)));
  }
}

// The case that motivated the scheme: a job array of 8 one-GPU jobs (consecutive ids) on one
// 8-GPU node. With the defaults its tasks 0 and 6, and 1 and 7, used to get the same ports.
// Now no two of them share a port at equal step ids, nor at step ids less than 15 apart (the
// distance at which jobs 6 apart first meet: 399 - 6 * 64), wherever the ids start; at 15 apart
// they do.
TEST(Ports, AJobArrayOfEightOnOneNodeNeverCollides) {
  const Scheme defaults{{20000, 32767}, 32};
  for (std::uint32_t first : {1u, 6u, 12345u, 67043328u - 8u, 4294967295u - 7u}) {
    Occupancy occupancy;
    for (std::uint32_t task = 0; task < 8; ++task) {
      occupancy.add(plan_ports(defaults.range, defaults.block, first + task, 0, 1, ""),
                    "array task " + std::to_string(task));
    }
    EXPECT_EQ(occupancy.first_clash, "") << "array starting at job " << first;
    for (std::uint32_t a = 0; a < 8; ++a) {
      for (std::uint32_t b = 0; b < 8; ++b) {
        for (std::uint32_t sa = 0; sa < 15; ++sa) {
          for (std::uint32_t sb = 0; sb < 15; ++sb) {
            if (a == b && sa == sb) continue;
            ASSERT_FALSE(share_a_port(step_ports(defaults, first + a, sa),
                                      step_ports(defaults, first + b, sb)))
                << "array tasks " << a << " (step " << sa << ") and " << b << " (step " << sb
                << "), first job " << first;
          }
        }
      }
    }
    EXPECT_TRUE(share_a_port(step_ports(defaults, first, 0), step_ports(defaults, first + 6, 15)));
  }
}

// The reported collisions: steps s and s+4 of one job, and jobs 301 (40 tasks per node) and 302
// (8), now with every mix of the two task counts.
TEST(Ports, CasesSeenOnClustersDoNotCollide) {
  const PortRange range{20000, 32767};
  for (std::uint32_t step = 0; step < 6; ++step) {
    Occupancy occupancy;
    occupancy.add(plan_ports(range, 32, 77, step, 1, ""), "step");
    occupancy.add(plan_ports(range, 32, 77, step + 4, 1, ""), "step + 4");
    EXPECT_EQ(occupancy.first_clash, "");
  }
  Occupancy jobs;
  jobs.add(plan_ports(range, 64, 301, 0, 40, ""), "job 301");
  jobs.add(plan_ports(range, 64, 302, 0, 8, ""), "job 302");
  EXPECT_EQ(jobs.first_clash, "");
}

// The bounds are exact: jobs D apart collide at steps |S - 64 D| apart (less than 64), and steps
// 64 apart of jobs 1 apart collide, so (G2) holds for no wider box of this shape.
TEST(Ports, TheDocumentedBoundsAreExact) {
  for (const auto& scheme : kSchemes) {
    const auto colours = derived_port_colours(scheme.range, scheme.block);
    const auto classes = derived_port_job_classes(scheme.range, scheme.block);
    const std::int64_t gap = static_cast<std::int64_t>(colours) - 64 * classes;
    ASSERT_LT(gap < 0 ? -gap : gap, 64);
    // With j' = j + D and s = s' - gap: 64 (j - j') + (s - s') = -64 D - S + 64 D = -S.
    const std::uint32_t base_step = 100;
    const auto step_of_first = static_cast<std::uint32_t>(base_step - gap);
    EXPECT_TRUE(share_a_port(step_ports(scheme, 1000, step_of_first),
                             step_ports(scheme, 1000 + classes, base_step)))
        << "block " << scheme.block;
    EXPECT_TRUE(share_a_port(step_ports(scheme, 1000, 164), step_ports(scheme, 1001, 100)));
  }
}

// Over a whole period of job ids (every residue mod S equally often), the share of pairs at one
// step id that collide is exactly 1/S: the rate of two unrelated jobs sharing a node.
TEST(Ports, UnrelatedJobsAtEqualStepIdsCollideOnceInSPairs) {
  const Scheme defaults{{20000, 32767}, 32};
  const auto colours = derived_port_colours(defaults.range, defaults.block);
  const std::uint32_t jobs = 2 * colours;
  std::vector<std::vector<std::uint16_t>> ports(jobs);
  for (std::uint32_t j = 0; j < jobs; ++j) ports[j] = step_ports(defaults, 5000 + j, 0);
  std::uint64_t pairs = 0;
  std::uint64_t collisions = 0;
  for (std::uint32_t a = 0; a < jobs; ++a) {
    for (std::uint32_t b = 0; b < jobs; ++b) {
      if (a == b) continue;
      ++pairs;
      collisions += share_a_port(ports[a], ports[b]) ? 1 : 0;
    }
  }
  // Each job meets exactly one other of the 2 S (its id +- S): 2 S ordered pairs.
  EXPECT_EQ(collisions, 2u * colours);
  EXPECT_EQ(pairs, 2ull * colours * (2 * colours - 1));
}

TEST(Ports, StepsBusierThanTheBlockAreRefusedWithTheFix) {
  try {
    plan_ports(PortRange{20000, 32767}, 32, 7, 0, 40, "");
    FAIL() << "a 40-task node fitted a 32-port block";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--resv-ports=41"), std::string::npos) << what;
    EXPECT_NE(what.find("port_block="), std::string::npos) << what;
  }
  EXPECT_EQ(plan_ports(PortRange{20000, 32767}, 41, 7, 0, 40, "").endpoint_ports.size(), 40u);
  EXPECT_THROW(plan_ports(PortRange{20000, 20999}, 32, 7, 0, 8, ""), Error);
}

TEST(Ports, ReservedPortsWinWhenThereAreEnough) {
  const auto p = plan_ports(PortRange{}, 32, 1, 0, 4, "12000-12003,12010");
  EXPECT_EQ(p.source, PortSource::kReserved);
  EXPECT_EQ(p.endpoint_ports, (std::vector<std::uint16_t>{12000, 12001, 12002, 12003}));
  EXPECT_EQ(p.master, 12010);
  const auto few = plan_ports(PortRange{}, 32, 1, 0, 4, "12000-12001");
  EXPECT_EQ(few.source, PortSource::kDerived);
  EXPECT_NE(few.note.find("--resv-ports=5"), std::string::npos);
  // Reserved ports carry no task limit of their own: a busy node fits when Slurm reserved enough.
  EXPECT_EQ(plan_ports(PortRange{}, 32, 1, 0, 40, "12000-12040").source, PortSource::kReserved);
  EXPECT_THROW(plan_ports(PortRange{}, 32, 1, 0, 4, "12000-x"), Error);
  EXPECT_THROW(plan_ports(PortRange{}, 32, 1, 0, 4, "12005-12000"), Error);
  // 4 KiB of repeated whole ranges would expand to gigabytes of ports.
  std::string repeated = "1-65535";
  for (int i = 0; i < 400; ++i) repeated += ",1-65535";
  EXPECT_THROW(parse_port_list(repeated.substr(0, 4000)), Error);
}
