// ShellQuote and SplitShellWords: round trips and the quoting rules.
#include "tfmpi/launcher/shell_words.h"

#include <gtest/gtest.h>

namespace tfmpi::launcher {
namespace {

using Words = std::vector<std::string>;

Words Split(const std::string& text) {
  std::string error;
  auto words = SplitShellWords(text, &error);
  EXPECT_TRUE(words.has_value()) << error;
  return words.value_or(Words{});
}

TEST(ShellWords, QuoteLeavesSafeWordsAlone) {
  EXPECT_EQ(ShellQuote("mpirun"), "mpirun");
  EXPECT_EQ(ShellQuote("/usr/bin/python3.11"), "/usr/bin/python3.11");
  EXPECT_EQ(ShellQuote("a:4,b:4"), "a:4,b:4");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
}

TEST(ShellWords, Split) {
  EXPECT_EQ(Split(""), Words{});
  EXPECT_EQ(Split("  -x  FOO\t--mca btl tcp "), (Words{"-x", "FOO", "--mca", "btl", "tcp"}));
  EXPECT_EQ(Split("'a b' \"c \\\"d\\\"\" e\\ f"), (Words{"a b", "c \"d\"", "e f"}));
  EXPECT_EQ(Split("x'y'\"z\""), Words{"xyz"});
  EXPECT_EQ(Split("''"), Words{""});
}

TEST(ShellWords, SplitErrors) {
  std::string error;
  EXPECT_FALSE(SplitShellWords("'a", &error).has_value());
  EXPECT_FALSE(SplitShellWords("\"a", &error).has_value());
  EXPECT_FALSE(SplitShellWords("a\\", &error).has_value());
}

TEST(ShellWords, QuoteThenSplitRoundTrips) {
  const Words words = {"plain", "with space", "it's", "$HOME", "", "tab\there", "\"q\""};
  std::string line;
  for (const auto& w : words) line += ShellQuote(w) + " ";
  EXPECT_EQ(Split(line), words);
}

}  // namespace
}  // namespace tfmpi::launcher
