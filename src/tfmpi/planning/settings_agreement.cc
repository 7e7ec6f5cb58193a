#include "tfmpi/planning/settings_agreement.h"

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <optional>

#include "tfmpi/planning/rank_groups.h"

namespace tfmpi::planning {
namespace {

void PutField(const std::string& field, std::string* out) {
  const auto n = static_cast<std::uint32_t>(field.size());
  for (int shift = 0; shift < 32; shift += 8) out->push_back(static_cast<char>((n >> shift) & 0xff));
  out->append(field);
}

std::optional<std::string> TakeField(const std::string& text, std::size_t* at) {
  if (text.size() - *at < 4) return std::nullopt;
  std::uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<std::uint32_t>(static_cast<unsigned char>(text[*at + i])) << (8 * i);
  *at += 4;
  if (text.size() - *at < n) return std::nullopt;
  std::string field = text.substr(*at, n);
  *at += n;
  return field;
}

// First field of every encoding: a rank of a build that encodes differently
// is reported as unreadable, not misread.
constexpr char kFormat[] = "tfmpi settings, format 1";

}  // namespace

std::string EncodeSettings(const Settings& settings) {
  std::string out;
  PutField(kFormat, &out);
  for (const auto& [name, value] : settings) {
    PutField(name, &out);
    PutField(value, &out);
  }
  return out;
}

bool DecodeSettings(const std::string& text, Settings* out) {
  out->clear();
  std::size_t at = 0;
  if (TakeField(text, &at) != std::optional<std::string>(kFormat)) return false;
  while (at < text.size()) {
    auto name = TakeField(text, &at);
    if (!name) return false;
    auto value = TakeField(text, &at);
    if (!value) return false;
    out->emplace_back(std::move(*name), std::move(*value));
  }
  return true;
}

std::string SettingsDisagreement(const std::vector<std::string>& encoded_per_rank) {
  const std::size_t n = encoded_per_rank.size();
  std::vector<std::map<std::string, std::string>> values(n);
  std::vector<std::string> names;  // in order of first appearance, rank 0 first
  std::vector<int> unreadable, readable;
  for (std::size_t r = 0; r < n; ++r) {
    Settings settings;
    if (!DecodeSettings(encoded_per_rank[r], &settings)) {
      unreadable.push_back(static_cast<int>(r));
      continue;
    }
    readable.push_back(static_cast<int>(r));
    for (auto& [name, value] : settings) {
      if (values[r].count(name) != 0) continue;
      bool known = false;
      for (std::size_t q = 0; q < r && !known; ++q) known = values[q].count(name) != 0;
      if (!known) names.push_back(name);
      values[r].emplace(name, value);
    }
  }
  std::vector<std::string> lines;
  if (!unreadable.empty())
    lines.push_back(fmt::format("  rank(s) {} sent settings that could not be read (a different "
                                "tfmpi build?)",
                                RankList(unreadable)));
  for (const std::string& name : names) {
    std::vector<std::string> texts;
    for (int r : readable) {
      auto it = values[r].find(name);
      texts.push_back(it == values[r].end() ? "(not set)" : fmt::format("'{}'", it->second));
    }
    std::string groups = RankGroups(texts, readable);
    if (!groups.empty()) lines.push_back(fmt::format("  {}: {}", name, groups));
  }
  if (lines.empty()) return "";
  return fmt::format(
      "the ranks were started with different settings, which would make them run different "
      "collectives or different math (Note [Settings every rank shares]):\n{}\nGive every rank "
      "the same values: tfmpirun passes its whole environment to every rank, so look for "
      "settings made per host (shell start-up files, a hand-written mpirun line, a different "
      "tfmpi install).",
      fmt::join(lines, "\n"));
}

}  // namespace tfmpi::planning
