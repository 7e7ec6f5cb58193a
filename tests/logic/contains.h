// Contains(text, {parts...}): passes when every part occurs in text; on
// failure names the missing part and prints the whole text. (Debian's
// GoogleTest ships without gMock, so no HasSubstr matcher.)
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

namespace tfmpi::testing {

inline ::testing::AssertionResult Contains(const std::string& text,
                                           std::initializer_list<std::string> parts) {
  for (const std::string& part : parts)
    if (text.find(part) == std::string::npos)
      return ::testing::AssertionFailure() << "missing \"" << part << "\" in \"" << text << "\"";
  return ::testing::AssertionSuccess();
}

}  // namespace tfmpi::testing
