// Pure fusion planning: which ready tensors share one collective.
//
// Note [Fusion rules]
// * Only allreduce and reduce (same dtype and reduce op) and broadcast (same
//   dtype) fuse; allgather, barrier and error responses run alone. Roots may
//   differ within a group: a reduce group runs as one reduce-scatter, a
//   broadcast group of several roots as one allgather (Note [Owner layout],
//   planning/owner_layout.h).
// * A tensor of at least `direct_threshold` bytes runs alone, straight from
//   the caller's buffer: copying it into a fusion buffer and back would cost
//   more memory traffic than the per-call latency it saves.
// * Buckets fill in arrival order up to `fusion_threshold` bytes; the groups
//   come out ordered by their first member, so every rank, given the same
//   ready list, executes the same groups in the same order.
#pragma once

#include <cstddef>
#include <vector>

#include "tfmpi/common/types.h"

namespace tfmpi::planning {

struct FusionItem {
  CollectiveKind kind = CollectiveKind::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  std::size_t bytes = 0;
  bool error = false;
  bool operator==(const FusionItem& o) const {
    return kind == o.kind && dtype == o.dtype && op == o.op && root == o.root &&
           bytes == o.bytes && error == o.error;
  }
};

struct FusionOptions {
  std::size_t fusion_threshold = 64u << 20;
  std::size_t direct_threshold = 1u << 20;
};

// Returns groups of indices into `items`; each index appears exactly once.
std::vector<std::vector<std::size_t>> PlanFusion(const std::vector<FusionItem>& items,
                                                 const FusionOptions& options);

}  // namespace tfmpi::planning
