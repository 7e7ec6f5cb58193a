#include "timing.h"

#include <algorithm>

namespace tfmpi::bench {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

double Min(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

double Max(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

std::vector<double> MaxOverRanks(const std::vector<double>& values, MPI_Comm comm) {
  std::vector<double> out(values.size());
  MPI_Allreduce(values.data(), out.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_MAX,
                comm);
  return out;
}

std::vector<double> GatherAll(double value, MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  std::vector<double> out(static_cast<std::size_t>(size));
  MPI_Allgather(&value, 1, MPI_DOUBLE, out.data(), 1, MPI_DOUBLE, comm);
  return out;
}

}  // namespace tfmpi::bench
