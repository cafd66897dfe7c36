#include <gtest/gtest.h>

#include <algorithm>
#include <bitset>
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

// The configurations the guarantee is checked on: the default, a narrow range, a wide block.
struct Scheme {
  PortRange range;
  std::uint32_t block;
};
const Scheme kSchemes[] = {{{20000, 32767}, 32},
                           {{20000, 24095}, 64},
                           {{40000, 40127}, 2},
                           {{20000, 32767}, 199},
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

TEST(Ports, DefaultsGiveSixJobClasses) {
  // README and the man page quote this figure.
  EXPECT_EQ(derived_port_job_classes(PortRange{20000, 32767}, 32), 6u);
}

// The documented guarantee, checked exhaustively over a window of jobs: with D job classes, the
// 64 steps of each of D consecutive jobs never share a port, for every task count per node the
// block allows, and each step stays inside the range. Task counts may differ between steps
// because a step's ports for n tasks are a subset of its ports for n + 1 (checked too), so
// disjoint sets at one count per step imply disjoint sets at any mix.
TEST(Ports, ConcurrentStepsAndNearbyJobsNeverShareAPortForAnyTaskCount) {
  for (const auto& scheme : kSchemes) {
    const auto classes = derived_port_job_classes(scheme.range, scheme.block);
    ASSERT_GE(classes, 1u);
    for (std::uint32_t first_job : {0u, 1u, 301u, 4093u, 4294967295u - classes}) {
      for (std::uint32_t tasks = 1; tasks < scheme.block; ++tasks) {
        Occupancy occupancy;
        for (std::uint32_t job = first_job; job - first_job < classes; ++job) {
          for (std::uint32_t step = 0; step < kDerivedPortStepClasses; ++step) {
            const auto p = plan_ports(scheme.range, scheme.block, job, step, tasks, "");
            for (auto port : ports_of(p)) {
              ASSERT_GE(port, scheme.range.first);
              ASSERT_LE(port, scheme.range.last);
            }
            if (tasks + 1 < scheme.block) {
              const auto wider =
                  ports_of(plan_ports(scheme.range, scheme.block, job, step, tasks + 1, ""));
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

// The bound is exact: jobs D apart share colours, so their steps with equal ids collide.
TEST(Ports, JobsTheDocumentedBoundApartCanCollide) {
  for (const auto& scheme : kSchemes) {
    const auto classes = derived_port_job_classes(scheme.range, scheme.block);
    Occupancy occupancy;
    occupancy.add(plan_ports(scheme.range, scheme.block, 1000, 3, 1, ""), "job");
    occupancy.add(plan_ports(scheme.range, scheme.block, 1000 + classes, 3, 1, ""), "job + D");
    EXPECT_NE(occupancy.first_clash, "") << scheme.block;
  }
  Occupancy steps;
  steps.add(plan_ports(PortRange{20000, 32767}, 32, 5, 2, 1, ""), "step 2");
  steps.add(plan_ports(PortRange{20000, 32767}, 32, 5, 2 + kDerivedPortStepClasses, 1, ""),
            "step 66");
  EXPECT_NE(steps.first_clash, "");
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
