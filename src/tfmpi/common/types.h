// Element types, reduction operators and collective kinds understood by the
// engine, with their names as users spell them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfmpi/common/status.h"

namespace tfmpi {

enum class DataType : std::uint8_t {
  kFloat16, kBFloat16, kFloat32, kFloat64, kInt32, kInt64, kUInt8, kBool,
};
inline constexpr DataType kAllDataTypes[] = {
    DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64,
    DataType::kInt32,   DataType::kInt64,    DataType::kUInt8,   DataType::kBool};

enum class ReduceOp : std::uint8_t { kSum, kAverage, kMin, kMax, kProduct };
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kAverage,
                                             ReduceOp::kMin, ReduceOp::kMax,
                                             ReduceOp::kProduct};

// kReduce: each tensor is reduced to its root (its owner) only; a group of
// them with several roots runs as one reduce-scatter (Executor::RunReduce).
enum class CollectiveKind : std::uint8_t { kAllreduce, kBroadcast, kAllgather, kBarrier, kReduce };

std::size_t DataTypeSize(DataType dtype);
const char* DataTypeName(DataType dtype);           // "float32"
std::optional<DataType> ParseDataType(std::string_view name);
bool IsFloatingPoint(DataType dtype);

const char* ReduceOpName(ReduceOp op);              // "average"
std::optional<ReduceOp> ParseReduceOp(std::string_view name);

const char* CollectiveKindName(CollectiveKind kind);  // "allreduce"

// Whether `op` is meaningful for `dtype`: average needs a floating type; bool
// supports min (logical and) and max (logical or) only.
Status CheckReduceSupported(DataType dtype, ReduceOp op);

using Shape = std::vector<std::int64_t>;
std::int64_t NumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);  // "[3, 4]"

}  // namespace tfmpi
