// Ranks grouped by what they said: the wording of every "ranks disagree"
// message (negotiation, settings).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace tfmpi::planning {

// "0-3, 5, 7-8": ascending ranks with runs of three or more as ranges.
std::string RankList(const std::vector<int>& ascending);

// "rank 4" / "ranks 0-3, 5": RankList after the right noun.
std::string RankPhrase(const std::vector<int>& ascending);

// Groups the ranks by what they said, in order of first appearance: texts[i]
// is what rank ranks[i] said (rank i where `ranks` is empty). "" when every
// rank says the same; otherwise "ranks 0-2 have X; rank 3 has Y" (each text
// as given, so the caller words and quotes it).
std::string RankGroups(const std::vector<std::string>& texts, const std::vector<int>& ranks = {});

// Why rank `rank`'s pending collectives (`names`, already quoted) fail after
// other ranks left: `leavers` maps each rank that left to the error it gave
// ("" for none; `rank` itself is skipped). Ranks that gave the same error are
// one group, in order of their first rank ("ranks 1-7 stopped with an error:
// X"), so an error every rank hits alike is said once, not once per rank.
std::string PeerLeftMessage(int rank, const std::string& names,
                            const std::map<int, std::string>& leavers);

}  // namespace tfmpi::planning
