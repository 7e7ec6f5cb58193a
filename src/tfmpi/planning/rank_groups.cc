#include "tfmpi/planning/rank_groups.h"

#include <fmt/format.h>

#include <map>

namespace tfmpi::planning {

std::string RankList(const std::vector<int>& ascending) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < ascending.size();) {
    std::size_t j = i;
    while (j + 1 < ascending.size() && ascending[j + 1] == ascending[j] + 1) ++j;
    if (j - i >= 2) {
      parts.push_back(fmt::format("{}-{}", ascending[i], ascending[j]));
    } else {
      for (std::size_t k = i; k <= j; ++k) parts.push_back(fmt::format("{}", ascending[k]));
    }
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string RankPhrase(const std::vector<int>& ascending) {
  return fmt::format("{} {}", ascending.size() == 1 ? "rank" : "ranks", RankList(ascending));
}

namespace {

// (text, its ranks) in order of first appearance: texts[i] is what rank
// ranks[i] said (rank i where `ranks` is empty).
std::vector<std::pair<std::string, std::vector<int>>> GroupByText(
    const std::vector<std::string>& texts, const std::vector<int>& ranks) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    auto [it, fresh] = index.try_emplace(texts[i], groups.size());
    if (fresh) groups.push_back({texts[i], {}});
    groups[it->second].second.push_back(ranks.empty() ? static_cast<int>(i) : ranks.at(i));
  }
  return groups;
}

}  // namespace

std::string RankGroups(const std::vector<std::string>& texts, const std::vector<int>& ranks) {
  const auto groups = GroupByText(texts, ranks);
  if (groups.size() <= 1) return "";
  std::vector<std::string> parts;
  for (const auto& [text, holders] : groups)
    parts.push_back(
        fmt::format("{} {} {}", RankPhrase(holders), holders.size() == 1 ? "has" : "have", text));
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string PeerLeftMessage(int rank, const std::string& names,
                            const std::map<int, std::string>& leavers) {
  std::vector<std::string> reasons;
  std::vector<int> failed, finished;
  for (const auto& [r, reason] : leavers) {
    if (r == rank) continue;
    if (reason.empty()) {
      finished.push_back(r);
    } else {
      reasons.push_back(reason);
      failed.push_back(r);
    }
  }
  if (!failed.empty()) {
    std::vector<std::string> parts;
    for (const auto& [reason, who] : GroupByText(reasons, failed))
      parts.push_back(fmt::format("{} stopped with an error: {}", RankPhrase(who), reason));
    return fmt::format("{}. Rank {} was still waiting for {}, which can't complete without {}.",
                       fmt::join(parts, "; "), rank, names, failed.size() == 1 ? "it" : "them");
  }
  const std::string who =
      finished.empty()
          ? "another rank has"
          : fmt::format("{} {}", RankPhrase(finished), finished.size() == 1 ? "has" : "have");
  return fmt::format(
      "{} finished (shut tfmpi down) while rank {} still waits for {}: the ranks ran different "
      "numbers of steps or collectives. Check that every rank sees the same amount of data "
      "(with tfmpirun, every rank must read the same batches).",
      who, rank, names);
}

}  // namespace tfmpi::planning
