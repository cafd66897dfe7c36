// SPDX-License-Identifier: Apache-2.0
// pci_config_vendor (topology/pci_io.hpp): the vendor ID a PCI function answers with now. On a
// sysfs-shaped tree, since this machine's own GPUs (if any) cannot be made to fall off the bus;
// and on this machine's real /sys for its first PCI function.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "topology/pci_io.hpp"

namespace dtrain::topology {
namespace {

class PciIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("dtrain-pci-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void device(const std::string& bus_id, const std::string& config) {
    std::filesystem::create_directories(dir_ / bus_id);
    std::ofstream(dir_ / bus_id / "config", std::ios::binary) << config;
  }

  std::filesystem::path dir_;
};

TEST_F(PciIo, ReadsTheVendorIdLittleEndian) {
  device("0000:1b:00.0", std::string("\xde\x10\x30\x23", 4));
  EXPECT_EQ(pci_config_vendor("0000:1b:00.0", dir_.string()), 0x10de);
}

TEST_F(PciIo, AFunctionOffTheBusReadsAllOnes) {
  device("0000:43:00.0", std::string(64, '\xff'));
  EXPECT_EQ(pci_config_vendor("0000:43:00.0", dir_.string()), 0xffff);
}

TEST_F(PciIo, AFunctionGoneFromSysfsReadsNothing) {
  EXPECT_EQ(pci_config_vendor("0000:52:00.0", dir_.string()), std::nullopt);
}

// Neither a short read nor a name that is no bus id says the device is gone: no evidence.
TEST_F(PciIo, AShortReadOrANameThatIsNoBusIdThrows) {
  device("0000:53:00.0", "x");
  EXPECT_THROW(pci_config_vendor("0000:53:00.0", dir_.string()), Error);
  device("0000:54:00.0", "\xde\x10");
  EXPECT_EQ(pci_config_vendor("0000:54:00.0", dir_.string()), 0x10de);
  for (const char* id : {"../0000:54:00.0", "0000:54:00.0/..", "54:00.0", "", "0000:54:00.0 "}) {
    EXPECT_THROW(pci_config_vendor(id, dir_.string()), Error) << id;
  }
}

TEST_F(PciIo, ReadsThisMachinesFirstPciFunction) {
  const std::filesystem::path sys = kPciDevicesDir;
  if (!std::filesystem::is_directory(sys) || std::filesystem::is_empty(sys)) {
    GTEST_SKIP() << "no PCI functions in " << sys;
  }
  const std::string first = std::filesystem::directory_iterator(sys)->path().filename().string();
  const auto vendor = pci_config_vendor(first);
  ASSERT_TRUE(vendor.has_value()) << first;
  EXPECT_NE(*vendor, 0xffff) << first;
  std::ifstream cached(sys / first / "vendor");
  std::string text;
  cached >> text;
  EXPECT_EQ(*vendor, std::stoul(text, nullptr, 16)) << first;
}

}  // namespace
}  // namespace dtrain::topology
