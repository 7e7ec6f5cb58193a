// Timing helpers: medians, cross-rank reduction, bandwidth as nccl-tests
// defines it (algbw = bytes / time, busbw = algbw * 2(n-1)/n for allreduce).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <vector>

namespace tfmpi::bench {

using BenchClock = std::chrono::steady_clock;

inline double SecondsSince(BenchClock::time_point t0) {
  return std::chrono::duration<double>(BenchClock::now() - t0).count();
}

double Median(std::vector<double> values);  // 0 for an empty vector
double Min(const std::vector<double>& values);
double Max(const std::vector<double>& values);

// Element-wise maximum over the ranks of `comm` (every rank passes the same
// length): an iteration takes as long as its slowest rank.
std::vector<double> MaxOverRanks(const std::vector<double>& values, MPI_Comm comm);

// Every rank's `value`, in rank order, on every rank.
std::vector<double> GatherAll(double value, MPI_Comm comm);

inline double AlgBandwidthGBps(std::size_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
}
inline double BusBandwidthGBps(double algbw, int ranks) {
  return ranks > 1 ? algbw * 2.0 * (ranks - 1) / ranks : algbw;
}

}  // namespace tfmpi::bench
