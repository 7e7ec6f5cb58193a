// Shell-style words: quoting for printing a command line that can be pasted
// into a shell, and splitting of --mpi-args "..." the way a POSIX shell would
// (quotes and backslashes; no expansion).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfmpi::launcher {

// `word` unchanged when it needs no quoting, otherwise in single quotes.
std::string ShellQuote(std::string_view word);

// Splits on unquoted whitespace; '...' is literal, "..." honours \" \\ \$ \`,
// a backslash outside quotes escapes the next character. Returns nullopt and
// sets *error on an unterminated quote or a trailing backslash.
std::optional<std::vector<std::string>> SplitShellWords(std::string_view text, std::string* error);

}  // namespace tfmpi::launcher
