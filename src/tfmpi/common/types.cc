#include "tfmpi/common/types.h"

#include <fmt/format.h>

namespace tfmpi {

std::size_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
    case DataType::kBFloat16: return 2;
    case DataType::kFloat32:
    case DataType::kInt32: return 4;
    case DataType::kFloat64:
    case DataType::kInt64: return 8;
    case DataType::kUInt8:
    case DataType::kBool: return 1;
  }
  return 0;
}

const char* DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kUInt8: return "uint8";
    case DataType::kBool: return "bool";
  }
  return "unknown";
}

std::optional<DataType> ParseDataType(std::string_view name) {
  for (DataType d : kAllDataTypes)
    if (name == DataTypeName(d)) return d;
  return std::nullopt;
}

bool IsFloatingPoint(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
         dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAverage: return "average";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kProduct: return "product";
  }
  return "unknown";
}

std::optional<ReduceOp> ParseReduceOp(std::string_view name) {
  for (ReduceOp op : kAllReduceOps)
    if (name == ReduceOpName(op)) return op;
  return std::nullopt;
}

const char* CollectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllreduce: return "allreduce";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kAllgather: return "allgather";
    case CollectiveKind::kBarrier: return "barrier";
    case CollectiveKind::kReduce: return "reduce";
  }
  return "unknown";
}

Status CheckReduceSupported(DataType dtype, ReduceOp op) {
  if (op == ReduceOp::kAverage && !IsFloatingPoint(dtype))
    return Status::InvalidArgument(fmt::format(
        "reduce op 'average' needs a floating-point dtype, got {}; use 'sum' and divide",
        DataTypeName(dtype)));
  if (dtype == DataType::kBool && op != ReduceOp::kMin && op != ReduceOp::kMax)
    return Status::InvalidArgument(fmt::format(
        "dtype bool supports reduce ops 'min' (logical and) and 'max' (logical or), "
        "not '{}'", ReduceOpName(op)));
  return Status::Ok();
}

std::int64_t NumElements(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace tfmpi
