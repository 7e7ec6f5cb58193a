// Ranks grouped by what they said: the wording of every "ranks disagree"
// message (negotiation, settings).
#pragma once

#include <string>
#include <vector>

namespace tfmpi::planning {

// "0-3, 5, 7-8": ascending ranks with runs of three or more as ranges.
std::string RankList(const std::vector<int>& ascending);

// Groups the ranks by what they said, in order of first appearance: texts[i]
// is what rank ranks[i] said (rank i where `ranks` is empty). "" when every
// rank says the same; otherwise "ranks 0-2 have X; rank 3 has Y" (each text
// as given, so the caller words and quotes it).
std::string RankGroups(const std::vector<std::string>& texts, const std::vector<int>& ranks = {});

}  // namespace tfmpi::planning
