// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/parse.hpp"

using dtrain::Error;
using dtrain::core::parse_unsigned;

TEST(ParseUnsigned, AcceptsPlainDecimal) {
  EXPECT_EQ(parse_unsigned("0", "x", 0, 10), 0u);
  EXPECT_EQ(parse_unsigned("4294967295", "x", 0, UINT64_MAX), 4294967295u);
}

TEST(ParseUnsigned, RejectsSignsSpacesAndGarbage) {
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "1a", "0x10", "abc"}) {
    EXPECT_THROW(parse_unsigned(bad, "x", 0, 100), Error) << bad;
  }
}

TEST(ParseUnsigned, RejectsOutOfRangeAndNamesInput) {
  try {
    parse_unsigned("99999999999999999999999", "port", 0, 65535);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("port"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("too large"), std::string::npos);
  }
  EXPECT_THROW(parse_unsigned("70000", "port", 0, 65535), Error);
  EXPECT_THROW(parse_unsigned("0", "port", 1, 65535), Error);
}

TEST(QuoteForError, TruncatesAndScrubs) {
  const std::string big(5000, 'a');
  const auto q = dtrain::core::quote_for_error(big);
  EXPECT_LT(q.size(), 100u);
  EXPECT_NE(q.find("5000 bytes"), std::string::npos);
  EXPECT_EQ(dtrain::core::quote_for_error(std::string("a\nb\x01", 4)), "'a?b?'");
}
