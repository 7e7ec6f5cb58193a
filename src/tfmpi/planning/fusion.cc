#include "tfmpi/planning/fusion.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace tfmpi::planning {

std::vector<std::vector<std::size_t>> PlanFusion(const std::vector<FusionItem>& items,
                                                 const FusionOptions& options) {
  using Key = std::tuple<int, int, int, int>;
  std::vector<std::vector<std::size_t>> groups;
  std::map<Key, std::size_t> open;  // key -> index of its open group
  std::vector<std::size_t> group_bytes;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const FusionItem& it = items[i];
    const bool fusable = !it.error &&
                         (it.kind == CollectiveKind::kAllreduce ||
                          it.kind == CollectiveKind::kBroadcast ||
                          it.kind == CollectiveKind::kReduce) &&
                         it.bytes < options.direct_threshold &&
                         it.bytes <= options.fusion_threshold;
    if (!fusable) {
      groups.push_back({i});
      group_bytes.push_back(it.bytes);
      continue;
    }
    Key key{static_cast<int>(it.kind), static_cast<int>(it.dtype),
            it.kind == CollectiveKind::kBroadcast ? -1 : static_cast<int>(it.op), -1};
    auto found = open.find(key);
    if (found != open.end() && group_bytes[found->second] + it.bytes <= options.fusion_threshold) {
      groups[found->second].push_back(i);
      group_bytes[found->second] += it.bytes;
    } else {
      open[key] = groups.size();
      groups.push_back({i});
      group_bytes.push_back(it.bytes);
    }
  }
  return groups;  // already ordered by first member: groups are opened in index order
}

}  // namespace tfmpi::planning
