// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "topology/cpu_list.hpp"
#include "topology/pci_address.hpp"

namespace dtrain::topology {
namespace {

TEST(PciAddress, NormalizesCaseAndDomainWidth) {
  EXPECT_EQ(normalize_bus_id("0000:1B:00.0", "x"), "0000:1b:00.0");
  EXPECT_EQ(normalize_bus_id("00000000:1B:00.0", "x"), "0000:1b:00.0");  // nvidia-smi form
  EXPECT_EQ(normalize_bus_id("1b:00.0", "x"), "0000:1b:00.0");
  EXPECT_EQ(normalize_bus_id("0035:04:00.1", "x"), "0035:04:00.1");
  EXPECT_EQ(normalize_bus_id("10000:e1:1f.7", "x"), "10000:e1:1f.7");
}

TEST(PciAddress, RejectsMalformedIdsNamingTheInput) {
  for (const char* bad : {"", "1b", "0000:1b:00", "0000:1g:00.0", "0000:1b:20.0", "0000:1b:00.8",
                          ":1b:00.0", "0000:1b:00.0.1", "123456789:00:00.0", "0:1:2:3.0"}) {
    try {
      parse_pci_address(bad, "allowed GPU");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find("allowed GPU"), std::string::npos) << e.what();
    }
  }
}

TEST(PciAddress, OrdersNumerically) {
  EXPECT_TRUE(pci_order_less("0000:1b:00.0", "0000:43:00.0"));
  EXPECT_TRUE(pci_order_less("ffff:00:00.0", "10000:00:00.0"));
  EXPECT_FALSE(pci_order_less("0000:43:00.0", "0000:43:00.0"));
}

TEST(CpuList, FormatsCompactRanges) {
  EXPECT_EQ(format_cpu_list({}), "");
  EXPECT_EQ(format_cpu_list({5}), "5");
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  CpuList dgx_task;
  for (unsigned c = 0; c < 14; ++c) dgx_task.push_back(c);
  for (unsigned c = 112; c < 126; ++c) dgx_task.push_back(c);
  EXPECT_EQ(format_cpu_list(dgx_task), "0-13,112-125");
}

TEST(CpuList, ParsesKernelFormatAndRoundTrips) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11", "x"), (CpuList{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("3,1,1-2", "x"), (CpuList{1, 2, 3}));
  EXPECT_TRUE(parse_cpu_list("", "x").empty());
  EXPECT_EQ(format_cpu_list(parse_cpu_list("0-55,112-167", "x")), "0-55,112-167");
}

TEST(CpuList, RejectsBadLists) {
  for (const char* bad : {"a", "1-", "-1", "3-1", "1--2", "1,,2", "99999", "1-2-3"}) {
    EXPECT_THROW(parse_cpu_list(bad, "cpu list"), Error) << bad;
  }
}

}  // namespace
}  // namespace dtrain::topology
