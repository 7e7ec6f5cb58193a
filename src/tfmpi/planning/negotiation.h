// Pure negotiation decisions: given what every rank submitted under one
// tensor name, decide whether to run it and with which agreed description, or
// fail it on every rank with a message naming the ranks that disagree.
#pragma once

#include <vector>

#include "tfmpi/common/tensor_meta.h"

namespace tfmpi::planning {

// per_rank[r] is rank r's meta for the tensor (all with the same name).
Response DecideResponse(const std::vector<TensorMeta>& per_rank);

// Whether `mine` (rank `rank`'s request) is served by the earlier decision
// `cached`: same meta, and for allgather the same first dimension as before.
bool MatchesCachedResponse(const TensorMeta& mine, int rank, const Response& cached);

}  // namespace tfmpi::planning
