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

// A request's hold on its name while it is in flight (Note [Pending slots],
// name_slots.h): set at admission, released by Complete(). It moves with the
// request and leaves the moved-from request without it; a copy of a request
// holds nothing, so only one request can ever release an admission.
struct NameHold {
  NameSlot* slot = nullptr;
  std::uint64_t admission = 0;

  NameHold() = default;
  NameHold(NameSlot* s, std::uint64_t a) : slot(s), admission(a) {}
  NameHold(const NameHold&) {}
  NameHold& operator=(const NameHold& o) {
    if (this != &o) *this = NameHold();
    return *this;
  }
  NameHold(NameHold&& o) noexcept : slot(o.slot), admission(o.admission) { o.slot = nullptr; }
  NameHold& operator=(NameHold&& o) noexcept {
    slot = o.slot;
    admission = o.admission;
    o.slot = nullptr;
    return *this;
  }
};

struct Request {
  TensorMeta meta;
  const void* input = nullptr;
  void* output = nullptr;  // allreduce / broadcast: same size as input; may equal it
  OutputAllocator allocate_output;  // allgather only
  DoneCallback done;
  Clock::time_point submitted{};
  // Set when the engine admits the request. Complete() releases the name
  // before `done` runs, so the caller can reuse it at once.
  NameHold hold;
};

// Releases the request's name (if it holds one), then fires `request.done`
// with `status` and clears it, so a request completes at most once. An
// exception the callback throws does not escape: it comes back as an
// Internal status naming the tensor (Note [Engine errors]).
Status Complete(Request& request, const Status& status);

}  // namespace tfmpi
