#include "tfmpi/launcher/shell_words.h"

#include <cctype>

namespace tfmpi::launcher {

namespace {

bool IsSafe(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
}

}  // namespace

std::string ShellQuote(std::string_view word) {
  bool safe = !word.empty();
  for (char c : word) safe = safe && IsSafe(c);
  if (safe) return std::string(word);
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::optional<std::vector<std::string>> SplitShellWords(std::string_view text, std::string* error) {
  std::vector<std::string> words;
  std::string current;
  bool in_word = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(std::move(current));
      current.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\') {
      if (++i == text.size()) {
        *error = "trailing backslash";
        return std::nullopt;
      }
      current += text[i];
    } else if (c == '\'') {
      const std::size_t end = text.find('\'', i + 1);
      if (end == std::string_view::npos) {
        *error = "unterminated single quote";
        return std::nullopt;
      }
      current.append(text.substr(i + 1, end - i - 1));
      i = end;
    } else if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\' && i + 1 < text.size() &&
            std::string_view("\"\\$`").find(text[i + 1]) != std::string_view::npos) {
          ++i;
        }
        current += text[i];
      }
      if (i == text.size()) {
        *error = "unterminated double quote";
        return std::nullopt;
      }
    } else {
      current += c;
    }
  }
  if (in_word) words.push_back(std::move(current));
  return words;
}

}  // namespace tfmpi::launcher
