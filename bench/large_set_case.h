// Cases (a) and (b): the ResNet-50 gradient set through the engine, one
// request per tensor, against one raw MPI_Allreduce of the same total bytes.
//
// Note [Fair interleaving]
// The machine this runs on is usually shared and noisy, so the two sides run
// in alternating blocks (engine first in even rounds, raw first in odd ones)
// and the report uses medians, plus the per-round paired ratio, which cancels
// slow drifts. Each engine block starts a fresh engine (warm-up iterations
// refill its response cache) and shuts it down before the raw block, so raw
// MPI is measured with no engine thread polling beside it. Iteration times
// are the maximum over ranks: a collective finishes when its slowest rank does.
#pragma once

#include "bench_context.h"

namespace tfmpi::bench {

struct LargeSetResult {
  int tensors = 0;
  std::size_t bytes = 0;
  double engine_seconds = 0;  // median iteration
  double raw_seconds = 0;
  double ratio = 0;  // engine bandwidth / raw bandwidth = raw_seconds / engine_seconds
};

LargeSetResult RunLargeSetCase(const BenchContext& ctx);

}  // namespace tfmpi::bench
