// SPDX-License-Identifier: Apache-2.0
// Where Open MPI's mpi_event_tick_rate may already be set (bootstrap/event_tick.hpp), and the
// launcher's list of a node's ranks (bootstrap/pmix_placement.hpp).
#include <gtest/gtest.h>

#include <map>

#include "bootstrap/event_tick.hpp"
#include "bootstrap/pmix_placement.hpp"

namespace {

using namespace dtrain::bootstrap;
using Vars = std::map<std::string, std::string>;
using Files = std::map<std::string, std::string>;

EnvLookup lookup_in(const Vars& vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

OptionalFileReader files_in(const Files& files) {
  return [files](const std::string& path) -> std::optional<std::string> {
    const auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  };
}

const std::vector<std::string> kSysconf = {"/etc/openmpi"};

TEST(EventTick, NothingSetsItByDefault) {
  EXPECT_FALSE(event_tick_set_elsewhere(lookup_in({{"HOME", "/home/u"}}),
                                        files_in({{"/etc/openmpi/openmpi-mca-params.conf",
                                                   "btl = ^openib\n# mpi_event_tick_rate = 5\n"}}),
                                        kSysconf));
}

TEST(EventTick, TheEnvironmentStands) {
  EXPECT_EQ(event_tick_set_elsewhere(lookup_in({{"OMPI_MCA_mpi_event_tick_rate", "4000"}}),
                                     files_in({}), kSysconf),
            "the environment");
}

TEST(EventTick, TheUsersAndTheSitesFilesStand) {
  EXPECT_EQ(event_tick_set_elsewhere(
                lookup_in({{"HOME", "/home/u"}}),
                files_in({{"/home/u/.openmpi/mca-params.conf", "  mpi_event_tick_rate=3000  \n"}}),
                kSysconf),
            "/home/u/.openmpi/mca-params.conf");
  EXPECT_EQ(event_tick_set_elsewhere(
                lookup_in({{"HOME", "/home/u"}}),
                files_in({{"/etc/openmpi/openmpi-mca-params.conf", "mpi_event_tick_rate = 0\n"}}),
                kSysconf),
            "/etc/openmpi/openmpi-mca-params.conf");
  EXPECT_EQ(event_tick_set_elsewhere(lookup_in({}),
                                     files_in({{"/etc/openmpi/openmpi-mca-params-override.conf",
                                                "mpi_event_tick_rate = 100\n"}}),
                                     kSysconf),
            "/etc/openmpi/openmpi-mca-params-override.conf");
}

TEST(EventTick, TheFilesOpenMpiIsToldToReadStand) {
  const Files files = {{"/site/a.conf", "mpi_event_tick_rate = 1\n"},
                       {"/home/u/.openmpi/mca-params.conf", "mpi_event_tick_rate = 2\n"}};
  EXPECT_EQ(event_tick_set_elsewhere(
                lookup_in({{"HOME", "/home/u"},
                           {"OMPI_MCA_mca_base_param_files", "/x.conf,/site/a.conf"}}),
                files_in(files), kSysconf),
            "/site/a.conf");
  // "none": Open MPI reads no file at all, so none of them counts.
  EXPECT_FALSE(event_tick_set_elsewhere(
      lookup_in({{"HOME", "/home/u"}, {"OMPI_MCA_mca_param_files", "none"}}), files_in(files),
      kSysconf));
  EXPECT_TRUE(event_tick_set_elsewhere(
      lookup_in({{"OMPI_MCA_mca_base_param_file_prefix", "tuned"}}), files_in({}), kSysconf));
}

TEST(EventTick, SysconfdirCandidates) {
  const auto dirs = open_mpi_sysconfdirs(
      lookup_in({{"OPAL_SYSCONFDIR", "/opt/etc"}, {"OPAL_PREFIX", "/opt/openmpi"}}));
  ASSERT_GE(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], "/opt/etc");
  EXPECT_EQ(dirs[1], "/opt/openmpi/etc");
}

TEST(PmixPlacement, LocalPeersAreTheNodesRanks) {
  const auto members = parse_local_peers("4,5,7,6", 6);
  ASSERT_TRUE(members.has_value());
  EXPECT_EQ(members->ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_FALSE(parse_local_peers("4,5", 6).has_value());  // not this rank's node
  EXPECT_FALSE(parse_local_peers("4,x", 4).has_value());  // not a list of ranks
  EXPECT_FALSE(parse_local_peers("", 0).has_value());
}

}  // namespace
