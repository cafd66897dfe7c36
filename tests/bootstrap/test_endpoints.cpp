// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "bootstrap/endpoints.hpp"
#include "core/error.hpp"

namespace {

using namespace dtrain::bootstrap;

TEST(Endpoints, ParsesAListInRankOrder) {
  const auto list = parse_endpoint_list("127.0.1.1:29500,127.0.1.1:29501,node2:29500", "list");
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0], (Endpoint{"127.0.1.1", 29500}));
  EXPECT_EQ(list[2], (Endpoint{"node2", 29500}));
  EXPECT_EQ(to_string(list[1]), "127.0.1.1:29501");
}

TEST(Endpoints, ParsesBracketedIPv6) {
  const auto endpoint = parse_endpoint("[::1]:29500", "e");
  EXPECT_EQ(endpoint, (Endpoint{"::1", 29500}));
  EXPECT_EQ(to_string(endpoint), "[::1]:29500");
}

TEST(Endpoints, RefusesMalformedEntriesNamingThem) {
  for (const char* bad : {"", "node1", ":29500", "node1:", "node1:0", "node1:65536", "node1:12x",
                          "::1:29500", "[::1:29500", "a:1,,b:2"}) {
    EXPECT_THROW(parse_endpoint_list(bad, "DTRAIN_ENDPOINTS"), dtrain::Error) << bad;
  }
  try {
    parse_endpoint_list("a:1,b:2,c", "DTRAIN_ENDPOINTS");
    FAIL();
  } catch (const dtrain::Error& error) {
    EXPECT_NE(std::string(error.what()).find("DTRAIN_ENDPOINTS entry 2"), std::string::npos)
        << error.what();
  }
}

TEST(Endpoints, HashIsXxh3AndSensitiveToEveryByte) {
  EXPECT_EQ(hash_text(""), 0x2d06800538d394c2ull);  // XXH3_64bits of the empty input
  EXPECT_EQ(hash_text("a:1,b:2"), hash_text("a:1,b:2"));
  EXPECT_NE(hash_text("a:1,b:2"), hash_text("a:1,b:3"));
  EXPECT_EQ(hex64(0xabcull), "0000000000000abc");
}

TEST(Endpoints, FirstDifferenceNamesTheEntry) {
  EXPECT_FALSE(first_difference("a:1,b:2", "a:1,b:2"));
  const auto diff = first_difference("a:1,b:2,c:3", "a:1,x:2,c:4");
  ASSERT_TRUE(diff);
  EXPECT_EQ(diff->index, 1u);
  EXPECT_EQ(diff->left, "b:2");
  EXPECT_EQ(diff->right, "x:2");
  const auto shorter = first_difference("a:1,b:2", "a:1");
  ASSERT_TRUE(shorter);
  EXPECT_EQ(shorter->index, 1u);
  EXPECT_EQ(shorter->right, "(missing)");
}

TEST(Endpoints, OneScanGivesCountHashAndTheWantedEntries) {
  const std::string list = "a:1,b:2,c:3,d:4";
  const auto scan = scan_endpoint_list(list, {3, 1, 9});
  EXPECT_EQ(scan.count, 4u);
  EXPECT_EQ(scan.hash, hash_text(list));
  ASSERT_EQ(scan.entries.size(), 2u);
  EXPECT_EQ(scan.entries.at(1), "b:2");
  EXPECT_EQ(scan.entries.at(3), "d:4");
  EXPECT_EQ(scan_endpoint_list("", {0}).count, 1u);  // one empty entry, as split counts it
  EXPECT_EQ(scan_endpoint_list("a:1,", {1}).entries.at(1), "");
}

TEST(Endpoints, RangeHashesAgreeExactlyWhereTheEntriesDo) {
  const TextEndpointList left("a:1,b:2,c:3,d:4,e:5");
  const TextEndpointList right("a:1,b:2,x:3,d:4");
  EXPECT_EQ(left.count(), 5u);
  EXPECT_EQ(right.count(), 4u);
  EXPECT_EQ(entry_range_hash(left, 0, 2), entry_range_hash(right, 0, 2));
  EXPECT_NE(entry_range_hash(left, 2, 3), entry_range_hash(right, 2, 3));
  EXPECT_EQ(entry_range_hash(left, 3, 4), entry_range_hash(right, 3, 4));
  // Past the end of the shorter list the count of entries differs.
  EXPECT_NE(entry_range_hash(left, 3, 5), entry_range_hash(right, 3, 5));
  std::vector<std::string> seen;
  left.visit(1, 3, [&](std::size_t i, std::string_view entry) {
    seen.push_back(std::to_string(i) + "=" + std::string(entry));
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"1=b:2", "2=c:3"}));
}

}  // namespace
