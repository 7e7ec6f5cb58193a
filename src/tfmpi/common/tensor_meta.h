// What ranks negotiate about a tensor (TensorMeta) and what they decide
// (Response): plain data shared by the planning layer (negotiation
// decisions) and the engine (requests, wire format, cache).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tfmpi/common/types.h"

namespace tfmpi {

// The part of a request that ranks negotiate about. Ranks must agree on all
// of it, except that an allgather's first dimension may differ per rank.
struct TensorMeta {
  std::string name;
  CollectiveKind kind = CollectiveKind::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // allreduce and reduce
  int root = 0;                  // broadcast and reduce
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

// The decision negotiation reaches about one tensor: run it (with the agreed
// meta) or fail it on every rank with `error`.
struct Response {
  TensorMeta meta;
  std::vector<std::int64_t> first_dims;  // allgather: each rank's first dimension
  std::string error;                     // empty: OK
  bool ok() const { return error.empty(); }
};

}  // namespace tfmpi
