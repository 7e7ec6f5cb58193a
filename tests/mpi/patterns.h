// Test inputs with closed-form results for any world size K.
//
// Every value is a small integer (or a half-integer average), exact in every
// dtype including float16 and bfloat16 for the world sizes the tests use, so
// results compare exactly; only average allows rounding (PatternTolerance).
// Signed dtypes get some negative elements, so sign handling is checked too.
#pragma once

#include <cstdint>
#include <vector>

#include "tfmpi/common/types.h"

namespace tfmpi::mpitest {

// Allreduce: rank `rank`'s element i, and element i of the result over `size` ranks.
double ReduceInput(DataType dtype, ReduceOp op, int rank, std::int64_t i, int size);
double ReduceExpected(DataType dtype, ReduceOp op, std::int64_t i, int size);
// Relative tolerance for ReduceExpected: 0 (exact) except for average.
double ReduceTolerance(DataType dtype, ReduceOp op);

// Broadcast: element i of root `root`'s tensor.
double BroadcastValue(DataType dtype, int root, std::int64_t i);
// A value no BroadcastValue takes at element i, to prefill outputs with.
double BroadcastSentinel(DataType dtype, int root, std::int64_t i);

// Allgather: element (row, col) of rank `rank`'s [rows, cols] block.
double GatherValue(DataType dtype, int rank, std::int64_t row, std::int64_t col);
// Element i of the gathered result when rank q contributed rows[q] rows of
// `cols` elements each (GatherValue blocks, concatenated in rank order).
// `rank_offset` shifts the rank passed to GatherValue (to vary data by step).
double GatheredValue(DataType dtype, const std::vector<std::int64_t>& rows, std::int64_t cols,
                     std::int64_t i, int rank_offset = 0);

}  // namespace tfmpi::mpitest
