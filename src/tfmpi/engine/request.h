// Requests: what a caller hands the engine (the negotiated part, TensorMeta,
// and the Response negotiation decides are in common/tensor_meta.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tfmpi/common/status.h"
#include "tfmpi/common/tensor_meta.h"
#include "tfmpi/common/types.h"

namespace tfmpi {

using Clock = std::chrono::steady_clock;

using DoneCallback = std::function<void(const Status&)>;
// Allgather output: called on the background thread with the gathered shape;
// returns where to write it (nullptr: allocation failed).
using OutputAllocator = std::function<void*(const Shape&)>;

struct NameSlot;

struct Request {
  TensorMeta meta;
  const void* input = nullptr;
  void* output = nullptr;  // allreduce / broadcast: same size as input; may equal it
  OutputAllocator allocate_output;  // allgather only
  DoneCallback done;
  Clock::time_point submitted{};
  // The name's slot and which admission of it this is, set when the engine
  // admits the request (Note [Pending slots], name_slots.h). Complete()
  // releases the name before `done` runs, so the caller can reuse it at once.
  NameSlot* slot = nullptr;
  std::uint64_t admission = 0;
};

Status Complete(Request& request, const Status& status);

}  // namespace tfmpi
