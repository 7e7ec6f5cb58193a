// Requests (what a caller hands the engine) and responses (what negotiation
// decides about a tensor).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tfmpi/common/status.h"
#include "tfmpi/common/types.h"

namespace tfmpi {

using Clock = std::chrono::steady_clock;

// The part of a request that ranks negotiate about. Ranks must agree on all
// of it, except that an allgather's first dimension may differ per rank.
struct TensorMeta {
  std::string name;
  CollectiveKind kind = CollectiveKind::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // allreduce only
  int root = 0;                  // broadcast only
  Shape shape;

  std::size_t bytes() const {
    return static_cast<std::size_t>(NumElements(shape)) * DataTypeSize(dtype);
  }
  bool operator==(const TensorMeta& o) const {
    return name == o.name && kind == o.kind && dtype == o.dtype && op == o.op &&
           root == o.root && shape == o.shape;
  }
  bool operator!=(const TensorMeta& o) const { return !(*this == o); }
};

// "allreduce(sum) float32[3, 4]", "broadcast(root 1) int32[5]".
std::string DescribeMeta(const TensorMeta& meta);

using DoneCallback = std::function<void(const Status&)>;
// Allgather output: called on the background thread with the gathered shape;
// returns where to write it (nullptr: allocation failed).
using OutputAllocator = std::function<void*(const Shape&)>;

struct Request {
  TensorMeta meta;
  const void* input = nullptr;
  void* output = nullptr;  // allreduce / broadcast: same size as input; may equal it
  OutputAllocator allocate_output;  // allgather only
  DoneCallback done;
  Clock::time_point submitted{};
};

// Fires `request.done` with `status` and clears it, so a request completes at
// most once. An exception the callback throws does not escape: it comes back
// as an Internal status naming the tensor (Note [Engine errors]).
Status Complete(Request& request, const Status& status);

// The decision negotiation reaches about one tensor: run it (with the agreed
// meta) or fail it on every rank with `error`.
struct Response {
  TensorMeta meta;
  std::vector<std::int64_t> first_dims;  // allgather: each rank's first dimension
  std::string error;                     // empty: OK
  bool ok() const { return error.empty(); }
};

}  // namespace tfmpi
