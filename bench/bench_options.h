// Command-line options of tfmpi_allreduce_bench (plain argv parsing).
#pragma once

#include <string>

#include "tfmpi/common/status.h"
#include "tfmpi/common/types.h"

namespace tfmpi::bench {

struct BenchOptions {
  // (a)/(b): the ResNet-50 gradient set through the engine vs one raw MPI_Allreduce.
  bool large = true;
  int iters = 20;   // timed iterations per side
  int block = 5;    // iterations per interleaved block
  int warmup = 2;   // untimed iterations at the start of every block
  ReduceOp op = ReduceOp::kSum;  // the engine's op; the raw baseline always sums
  long long raw_chunk_bytes = 0;  // raw baseline in chunks of this size; 0: one call
  bool conv_bias = true;         // Keras layout (false: torchvision's 161 tensors)
  // (c): many small tensors in steady state.
  bool small = true;
  int small_count = 1000;
  int small_bytes = 1024;
  int small_iters = 200;
  int small_warmup = 20;

  bool list_shapes = false;
  bool help = false;
};

// Parses argv; on error the Status says which flag and what it accepts.
Status ParseBenchOptions(int argc, char** argv, BenchOptions* out);

std::string BenchUsage(const char* program);

}  // namespace tfmpi::bench
