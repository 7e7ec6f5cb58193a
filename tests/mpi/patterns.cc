#include "patterns.h"

#include <cmath>

#include "mpi_test_util.h"

namespace tfmpi::mpitest {
namespace {

// -1 on every fourth element of signed dtypes.
double Sign(DataType dtype, std::int64_t i) { return IsSigned(dtype) && i % 4 == 3 ? -1 : 1; }

}  // namespace

double ReduceInput(DataType dtype, ReduceOp op, int rank, std::int64_t i, int size) {
  if (dtype == DataType::kBool) {  // all true, all false, or true on one rank
    if (i % 3 == 0) return 1;
    if (i % 3 == 1) return 0;
    return rank == i % size ? 1 : 0;
  }
  if (op == ReduceOp::kProduct)  // 1 or 2; rank 0 carries the sign
    return (1 + (rank + i) % 2) * (rank == 0 ? Sign(dtype, i) : 1);
  return Sign(dtype, i) * static_cast<double>(1 + (rank + i) % size);  // a permutation of 1..K
}

double ReduceExpected(DataType dtype, ReduceOp op, std::int64_t i, int size) {
  const double k = size;
  const double s = Sign(dtype, i);
  if (dtype == DataType::kBool) {
    if (i % 3 == 0) return 1;
    if (i % 3 == 1) return 0;
    return op == ReduceOp::kMin ? (size == 1 ? 1 : 0) : 1;  // and / or
  }
  switch (op) {
    case ReduceOp::kSum: return s * k * (k + 1) / 2;
    case ReduceOp::kAverage: return s * (k + 1) / 2;
    case ReduceOp::kMin: return s > 0 ? 1 : -k;
    case ReduceOp::kMax: return s > 0 ? k : -1;
    case ReduceOp::kProduct: {
      // Ranks r with (r + i) odd contribute a factor 2.
      const int twos = i % 2 == 0 ? size / 2 : (size + 1) / 2;
      return s * std::ldexp(1.0, twos);
    }
  }
  return 0;
}

double ReduceTolerance(DataType dtype, ReduceOp op) {
  if (op != ReduceOp::kAverage) return 0;
  switch (dtype) {
    case DataType::kFloat16: return 1e-3;
    case DataType::kBFloat16: return 1e-2;
    case DataType::kFloat32: return 1e-6;
    default: return 1e-12;
  }
}

double BroadcastValue(DataType dtype, int root, std::int64_t i) {
  if (dtype == DataType::kBool) return (root + i) % 2;
  return Sign(dtype, i) * static_cast<double>((root * 5 + i) % 23 + 1);
}

double BroadcastSentinel(DataType dtype, int root, std::int64_t i) {
  if (dtype == DataType::kBool) return 1 - BroadcastValue(dtype, root, i);
  return 99;
}

double GatherValue(DataType dtype, int rank, std::int64_t row, std::int64_t col) {
  if (dtype == DataType::kBool) return (rank + row + col) % 2;
  return (IsSigned(dtype) && col == 1 ? -1 : 1) *
         static_cast<double>((rank * 7 + row * 3 + col) % 50 + 1);
}

double GatheredValue(DataType dtype, const std::vector<std::int64_t>& rows, std::int64_t cols,
                     std::int64_t i, int rank_offset) {
  std::int64_t row = i / cols;
  for (std::size_t q = 0; q < rows.size(); ++q) {
    if (row < rows[q]) return GatherValue(dtype, static_cast<int>(q) + rank_offset, row, i % cols);
    row -= rows[q];
  }
  return std::nan("");  // past the end: never equal to anything
}

}  // namespace tfmpi::mpitest
