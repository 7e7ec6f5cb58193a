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

std::string RankGroups(const std::vector<std::string>& texts, const std::vector<int>& ranks) {
  std::map<std::string, std::vector<int>> groups;
  std::vector<const std::string*> order;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    auto [it, fresh] = groups.try_emplace(texts[i]);
    if (fresh) order.push_back(&it->first);
    it->second.push_back(ranks.empty() ? static_cast<int>(i) : ranks.at(i));
  }
  if (groups.size() <= 1) return "";
  std::vector<std::string> parts;
  for (const std::string* text : order) {
    const std::vector<int>& holders = groups.at(*text);
    const bool one = holders.size() == 1;
    parts.push_back(fmt::format("{} {} {} {}", one ? "rank" : "ranks", RankList(holders),
                                one ? "has" : "have", *text));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace tfmpi::planning
