#include "tfmpi/planning/negotiation.h"

#include "tfmpi/planning/rank_groups.h"

#include <fmt/format.h>

#include <functional>
#include <string>

namespace tfmpi::planning {
namespace {

// RankGroups of the text `describe` gives each rank's meta.
std::string Disagreement(const std::vector<TensorMeta>& per_rank,
                         const std::function<std::string(const TensorMeta&)>& describe) {
  std::vector<std::string> texts;
  texts.reserve(per_rank.size());
  for (const TensorMeta& m : per_rank) texts.push_back(describe(m));
  return RankGroups(texts);
}

Shape Trailing(const Shape& s) { return s.empty() ? s : Shape(s.begin() + 1, s.end()); }

}  // namespace

Response DecideResponse(const std::vector<TensorMeta>& per_rank) {
  Response resp;
  resp.meta = per_rank.front();
  const std::string& name = resp.meta.name;
  auto fail = [&](const char* what, const std::string& detail) {
    resp.error = fmt::format(
        "tensor '{}': ranks disagree on {}: {}. Every rank must submit the same collective "
        "under one name, agreeing on {}.",
        name, what, detail, what);
    return resp;
  };
  std::string d = Disagreement(per_rank, [](const TensorMeta& m) {
    return fmt::format("{}", CollectiveKindName(m.kind));
  });
  if (!d.empty()) return fail("the operation", d);
  d = Disagreement(per_rank, [](const TensorMeta& m) { return std::string(DataTypeName(m.dtype)); });
  if (!d.empty()) return fail("the dtype", d);

  switch (resp.meta.kind) {
    case CollectiveKind::kAllreduce:
      d = Disagreement(per_rank, [](const TensorMeta& m) { return std::string(ReduceOpName(m.op)); });
      if (!d.empty()) return fail("the reduce op", d);
      d = Disagreement(per_rank, [](const TensorMeta& m) { return ShapeToString(m.shape); });
      if (!d.empty()) return fail("the shape", d);
      break;
    case CollectiveKind::kReduce:
      d = Disagreement(per_rank, [](const TensorMeta& m) { return std::string(ReduceOpName(m.op)); });
      if (!d.empty()) return fail("the reduce op", d);
      [[fallthrough]];
    case CollectiveKind::kBroadcast:
      d = Disagreement(per_rank, [](const TensorMeta& m) { return fmt::format("root {}", m.root); });
      if (!d.empty()) return fail("the root", d);
      d = Disagreement(per_rank, [](const TensorMeta& m) { return ShapeToString(m.shape); });
      if (!d.empty()) return fail("the shape", d);
      break;
    case CollectiveKind::kAllgather:
      d = Disagreement(per_rank, [](const TensorMeta& m) {
        return m.shape.empty() ? std::string("a scalar")
                               : fmt::format("rank {}", m.shape.size());
      });
      if (!d.empty()) return fail("the number of dimensions", d);
      d = Disagreement(per_rank, [](const TensorMeta& m) {
        return fmt::format("trailing dimensions {}", ShapeToString(Trailing(m.shape)));
      });
      if (!d.empty()) return fail("the dimensions after the first", d);
      for (const TensorMeta& m : per_rank)
        resp.first_dims.push_back(m.shape.empty() ? 0 : m.shape[0]);
      break;
    case CollectiveKind::kBarrier:
      break;
  }
  return resp;
}

bool MatchesCachedResponse(const TensorMeta& mine, int rank, const Response& cached) {
  if (!cached.ok()) return false;
  if (mine.kind != CollectiveKind::kAllgather) return mine == cached.meta;
  const TensorMeta& c = cached.meta;
  if (mine.name != c.name || mine.kind != c.kind || mine.dtype != c.dtype ||
      mine.shape.size() != c.shape.size() || mine.shape.empty())
    return false;
  if (static_cast<std::size_t>(rank) >= cached.first_dims.size() ||
      mine.shape[0] != cached.first_dims[static_cast<std::size_t>(rank)])
    return false;
  return Trailing(mine.shape) == Trailing(c.shape);
}

}  // namespace tfmpi::planning
