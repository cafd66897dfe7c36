// SPDX-License-Identifier: Apache-2.0
#include "topology/xml_guard.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "topology/load_io.hpp"
#include "topology_test_support.hpp"

namespace dtrain::topology {
namespace {

constexpr const char* kHeader =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
    "<topology version=\"2.0\">\n";  // lines 1-3
constexpr const char* kSets =
    "cpuset=\"0x00000003\" complete_cpuset=\"0x00000003\" nodeset=\"0x00000001\" "
    "complete_nodeset=\"0x00000001\"";

// A small valid topology: a Machine with one NUMA node, two PUs and one PCI device; `machine`
// replaces the Machine's attributes and `extra` goes inside it.
std::string topology_xml(const std::string& machine = "", const std::string& extra = "") {
  std::ostringstream xml;
  xml << kHeader << "  <object type=\"Machine\" os_index=\"0\" "
      << (machine.empty() ? kSets : machine) << " gp_index=\"1\">\n"
      << "    <object type=\"NUMANode\" os_index=\"0\" " << kSets
      << " gp_index=\"2\" local_memory=\"1024\"/>\n"
      << "    <object type=\"PU\" os_index=\"0\" cpuset=\"0x00000001\" "
         "complete_cpuset=\"0x00000001\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" "
         "gp_index=\"3\"/>\n"
      << "    <object type=\"PU\" os_index=\"1\" cpuset=\"0x00000002\" "
         "complete_cpuset=\"0x00000002\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" "
         "gp_index=\"4\"/>\n"
      << "    <object type=\"PCIDev\" gp_index=\"5\" pci_busid=\"0000:01:00.0\" "
         "pci_type=\"0302 [10de:2330] [10de:16c1] a1\">\n"
      << "      <info name=\"PCIDevice\" value=\"H100 &quot;SXM&quot; &lt;80GB&gt; &amp; more\"/>\n"
      << "    </object>\n"
      << extra << "  </object>\n"
      << "</topology>\n";
  return xml.str();
}

void expect_refused(const std::string& xml, std::size_t line, const std::string& detail) {
  const auto hazard = find_xml_hazard(xml);
  ASSERT_TRUE(hazard.has_value()) << "accepted:\n" << xml;
  EXPECT_EQ(hazard->line, line) << hazard->reason;
  EXPECT_NE(hazard->reason.find(detail), std::string::npos) << hazard->reason;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(XmlGuard, AcceptsTheSmallTopologyAndHwlocLoadsIt) {
  const std::string xml = topology_xml();
  EXPECT_FALSE(find_xml_hazard(xml).has_value()) << find_xml_hazard(xml)->reason;
  const auto path = std::filesystem::path(::testing::TempDir()) / "dtrain-guard-ok.xml";
  std::ofstream(path) << xml;
  const NodeTopology topo = load_topology(path.string());
  EXPECT_EQ(topo.cores.size(), 2u);
  ASSERT_EQ(topo.gpus.size(), 1u);
  EXPECT_EQ(topo.gpus[0].model, "H100 \"SXM\" <80GB> & more");
}

TEST(XmlGuard, AcceptsEveryFixtureAndRealCapture) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(DTRAIN_TOPOLOGY_FIXTURES)) {
    if (entry.path().extension() == ".xml") files.push_back(entry.path().string());
  }
  if (testing::have_shared_topologies()) {
    for (const auto& entry : std::filesystem::directory_iterator(DTRAIN_SHARED_TOPOLOGIES)) {
      if (entry.path().extension() == ".xml") files.push_back(entry.path().string());
    }
  }
  ASSERT_GE(files.size(), 5u);
  for (const auto& file : files) {
    const auto hazard = find_xml_hazard(read_file(file));
    EXPECT_FALSE(hazard.has_value()) << file << " line " << hazard->line << ": " << hazard->reason;
  }
}

// The three inputs on which hwloc 2.9 itself crashes.
TEST(XmlGuard, RefusesABitmapThatStartsWithAComma) {
  // The shape the topology fuzzer found: hwloc_bitmap_sscanf asserts on it.
  expect_refused(topology_xml("cpuset=\",x00000001\" complete_cpuset=\"0x3\" nodeset=\"0x1\" "
                              "complete_nodeset=\"0x1\""),
                 4, "cpuset=',x00000001', not a bitmap");
  expect_refused(topology_xml(kSets, "    <cpukind cpuset=\",0x1\"/>\n"), 11, "<cpukind>");
}

TEST(XmlGuard, RefusesAnIoObjectAsTheRoot) {
  for (const char* type : {"PCIDev", "Bridge", "OSDev", "Misc", "pcibridge", "os"}) {
    expect_refused(
        std::string(kHeader) + "  <object type=\"" + type + "\" gp_index=\"1\"/>\n</topology>\n", 4,
        "root object is of type");
  }
}

TEST(XmlGuard, RefusesACpuSideObjectWithoutAllFourSets) {
  expect_refused(topology_xml("cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\""), 4,
                 "has no complete_cpuset");
  const std::string pu_without_nodeset =
      "    <object type=\"Core\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
      "complete_nodeset=\"0x1\"/>\n";
  expect_refused(topology_xml(kSets, pu_without_nodeset), 11, "'Core'> has no nodeset");
  // I/O objects below the root carry no sets.
  EXPECT_FALSE(find_xml_hazard(topology_xml(kSets,
                                            "    <object type=\"OSDev\" name=\"eth0\" "
                                            "osdev_type=\"2\"/>\n"))
                   .has_value());
}

TEST(XmlGuard, AcceptsAnHwloc1FileWithoutNodesetsAndHwlocLoadsIt) {
  const auto pu = [](const std::string& index, const std::string& bit) {
    return "    <object type=\"PU\" os_index=\"" + index + "\" cpuset=\"" + bit +
           "\" complete_cpuset=\"" + bit + "\"/>\n";
  };
  std::string v1 =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<topology>\n"
      "  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x3\" "
      "complete_cpuset=\"0x3\">\n" +
      pu("0", "0x1") + pu("1", "0x2");
  v1 += "  </object>\n</topology>\n";
  EXPECT_FALSE(find_xml_hazard(v1).has_value()) << find_xml_hazard(v1)->reason;
  const auto path = std::filesystem::path(::testing::TempDir()) / "dtrain-guard-v1.xml";
  std::ofstream(path) << v1;
  const NodeTopology topo = load_topology(path.string());
  EXPECT_EQ(topo.cores.size(), 2u);
  EXPECT_EQ(topo.numa_nodes.size(), 1u);  // the one hwloc adds

  // Nodesets on some objects only, or a v2 file without them, are refused.
  std::string mixed = v1;
  mixed.insert(mixed.find("/>"), " nodeset=\"0x1\" complete_nodeset=\"0x1\"");
  expect_refused(mixed, 4, "both with and without nodesets");
  std::string v2 = v1;
  v2.replace(v2.find("<topology>"), 10, "<topology version=\"2.0\">");
  expect_refused(v2, 3, "'Machine'> has no nodeset");
}

TEST(XmlGuard, RefusesASetThatIsNotPartOfItsCompleteSet) {
  // The shape the topology fuzzer found next: hwloc 2.9 dereferences NULL on this root.
  expect_refused(std::string(kHeader) +
                     "  <object type=\"Machine\" cpuset=\"0x000000ff\" complete_cpuset=\"0x0\" "
                     "nodeset=\"0x1\" complete_nodeset=\"0x1\"/>\n</topology>\n",
                 4, "has a cpuset that is not part of its complete_cpuset");
  expect_refused(topology_xml("cpuset=\"0x3\" complete_cpuset=\"0x3\" nodeset=\"0x3\" "
                              "complete_nodeset=\"0x1\""),
                 4, "has a nodeset that is not part of its complete_nodeset");
  EXPECT_FALSE(find_xml_hazard(topology_xml("cpuset=\"0x1\" complete_cpuset=\"0xf...f\" "
                                            "nodeset=\"0x1\" complete_nodeset=\"0x3\""))
                   .has_value());
}

TEST(XmlGuard, RefusesObjectsWithoutAKnownType) {
  expect_refused(topology_xml(kSets, "    <object os_index=\"3\" " + std::string(kSets) + "/>\n"),
                 11, "no type attribute");
  expect_refused(topology_xml(kSets, "    <object type=\"Toaster\" " + std::string(kSets) + "/>\n"),
                 11, "'Toaster' is not one hwloc knows");
  // Types hwloc imports although hwloc_type_sscanf does not know them.
  EXPECT_FALSE(find_xml_hazard(
                   topology_xml(kSets, "    <object type=\"Cache\" " + std::string(kSets) + "/>\n"))
                   .has_value());
}

TEST(XmlGuard, AcceptsEveryBitmapFormHwlocWrites) {
  for (const char* bitmap : {"0x0", "0xf...f", "0xf...f,0x00000001", "0x00ffffff,0xffffffff",
                             "0xAbCdEf01,0x1", "0x000000ff,,0x0", "0xf...f,,0x0", "0x1,,,0x2"}) {
    EXPECT_FALSE(find_xml_hazard(
                     topology_xml(kSets, "    <cpukind cpuset=\"" + std::string(bitmap) + "\"/>\n"))
                     .has_value())
        << bitmap;
  }
  for (const char* bitmap : {"", ",", ",0x1", "0x1,", "1", "0x", "0x123456789", "0xg", "0xf...f,",
                             "0XF...F", " 0x1", "&#48;x1"}) {
    const auto hazard = find_xml_hazard(
        topology_xml(kSets, "    <cpukind cpuset=\"" + std::string(bitmap) + "\"/>\n"));
    EXPECT_TRUE(hazard.has_value()) << bitmap;
  }
}

// What would let libxml2 or hwloc's own reader see something this scan did not.
TEST(XmlGuard, RefusesWhatTheTwoReadersWouldReadDifferently) {
  expect_refused(std::string("<topology>\n") + '\0', 2, "NUL byte");
  expect_refused("<?xml version=\"1.0\" encoding=\"UTF-7\"?>\n<topology/>\n", 1,
                 "encoding 'UTF-7'");
  expect_refused("\x4c\x6f\x20\x94", 1, "not UTF-8");
  expect_refused("Lo\x20\x20", 1, "does not start with '<'");
  expect_refused(topology_xml(kSets, "    <info name=\"model\" value=\"ml\x92x\"/>\n"), 11,
                 "not UTF-8");
  for (const char* bad : {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"}) {
    expect_refused(
        topology_xml(kSets, "    <info name=\"a\" value=\"" + std::string(bad) + "\"/>\n"), 11,
        "not UTF-8");
  }
  EXPECT_FALSE(find_xml_hazard(topology_xml(kSets,
                                            "    <info name=\"a\" value=\"\xc3\xa9 \xe2\x82\xac "
                                            "\xf0\x9f\x98\x80\"/>\n"))
                   .has_value());
  expect_refused("<?xml version=\"1.0\"?>\n<!DOCTYPE topology [<!ENTITY io \"PCIDev\">]>\n", 2,
                 "internal subset");
  // Each inside the Machine of topology_xml, on line 11.
  const std::vector<std::pair<std::string, std::string>> inside_machine = {
      {"<info name=\"a\" value=\"&io;\"/>", "reference '&io;'"},
      {"<info name=\"a\" value=\"&#44;\"/>", "reference '&#44;'"},
      {"<h:object type=\"PU\"/>", "tag whose name"},
      {"<object type='PU'/>", "name=\"value\""},
      {"<object type = \"PU\"/>", "name=\"value\""},
      {"<object h:type=\"PU\"/>", "name=\"value\""},
      {"<object type=\"Core\"\r\n cpuset=\"0x1\"/>", "name=\"value\""},
      {"<info name=\"a\" name=\"b\"/>", "<info> has attribute name twice"},
      {"<info name=\"a>b\" value=\"c\"/>", "literal"},
      {"<info name=\"a\tb\" value=\"c\"/>", "literal"},
      {"<![IGNORE[ x ]]>", "'<!'"},
      {"<!-- never closed", "comment is never closed"},
  };
  for (const auto& [element, detail] : inside_machine) {
    expect_refused(topology_xml(kSets, "    " + element + "\n"), 11, detail);
  }
  expect_refused(std::string(kHeader) + "  <object type=\"Machine\" " + kSets, 4, "never closed");
}

TEST(XmlGuard, SkipsCommentsCdataAndText) {
  // libxml2 sees no element in any of these, so neither does the scan.
  const std::string hidden = "<object type=\"PCIDev\" cpuset=\",\"/>";
  EXPECT_FALSE(find_xml_hazard(topology_xml(kSets, "    <!-- " + hidden + " -->\n")).has_value());
  EXPECT_FALSE(find_xml_hazard(topology_xml(kSets, "    <userdata length=\"3\"><![CDATA[" + hidden +
                                                       "]]></userdata>\n"))
                   .has_value());
  EXPECT_FALSE(find_xml_hazard(std::string("\xEF\xBB\xBF") + topology_xml()).has_value());
}

TEST(XmlGuard, RefusesNestingDeeperThanLibxml2Allows) {
  std::string deep = kHeader;
  for (int i = 0; i < 300; ++i) deep += "<object type=\"Group\" " + std::string(kSets) + ">\n";
  expect_refused(deep, 3 + 256, "nest more than 256 deep");
}

TEST(XmlGuard, LoadTopologyNamesTheFileTheLineAndTheFix) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "dtrain-guard-comma.xml";
  std::ofstream(path) << topology_xml(
      "cpuset=\",x1\" complete_cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\"");
  try {
    load_topology(path.string());
    ADD_FAILURE() << "loaded " << path;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::kResource);
    EXPECT_NE(what.find("topology XML '" + path.string() +
                        "' is not a valid hwloc topology: "
                        "line 4: <object> has cpuset=',x1'"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("lstopo --of xml FILE"), std::string::npos) << what;
  }
}

TEST(XmlGuard, LoadTopologyRefusesWhatIsNotARegularFile) {
  try {
    load_topology(::testing::TempDir());
    ADD_FAILURE() << "loaded a directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("it is not a regular file"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dtrain::topology
