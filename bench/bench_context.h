// What every benchmark case shares: the process's MPI view, the engine
// options resolved from the environment, and fatal-error handling.
#pragma once

#include <mpi.h>

#include <string>

#include "bench_options.h"
#include "tfmpi/engine/options.h"

namespace tfmpi::bench {

struct BenchContext {
  MPI_Comm comm = MPI_COMM_NULL;  // the benchmark's own duplicate of MPI_COMM_WORLD
  int rank = 0;
  int size = 1;
  EngineOptions engine_options;
  BenchOptions options;
};

// Prints "[rank r] what: status" to stderr and aborts every rank.
[[noreturn]] void Fail(const BenchContext& ctx, const std::string& what, const Status& status);

inline void Check(const BenchContext& ctx, const std::string& what, const Status& status) {
  if (!status.ok()) Fail(ctx, what, status);
}

}  // namespace tfmpi::bench
