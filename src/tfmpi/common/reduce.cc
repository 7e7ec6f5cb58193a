#include "tfmpi/common/reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "tfmpi/common/enforce.h"
#include "tfmpi/common/half.h"

namespace tfmpi {
namespace {

template <typename T>
T Combine(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return static_cast<T>(a + b);
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kMax: return std::max(a, b);
    case ReduceOp::kProduct: return static_cast<T>(a * b);
  }
  return a;
}

template <typename T>
void ReduceTyped(void* inout, const void* in, std::size_t n, ReduceOp op) {
  T* a = static_cast<T*>(inout);
  const T* b = static_cast<const T*>(in);
  switch (op) {  // hoisted so the common loops vectorise
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      for (std::size_t i = 0; i < n; ++i) a[i] = static_cast<T>(a[i] + b[i]);
      return;
    default:
      for (std::size_t i = 0; i < n; ++i) a[i] = Combine(a[i], b[i], op);
  }
}

template <float (*ToF)(std::uint16_t), std::uint16_t (*FromF)(float)>
void ReduceHalf(void* inout, const void* in, std::size_t n, ReduceOp op) {
  auto* a = static_cast<std::uint16_t*>(inout);
  const auto* b = static_cast<const std::uint16_t*>(in);
  for (std::size_t i = 0; i < n; ++i) a[i] = FromF(Combine(ToF(a[i]), ToF(b[i]), op));
}

template <typename T>
void ScaleCopyTyped(void* dst, const void* src, std::size_t n, double factor) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  const T f = static_cast<T>(factor);
  for (std::size_t i = 0; i < n; ++i) d[i] = s[i] * f;
}

template <float (*ToF)(std::uint16_t), std::uint16_t (*FromF)(float)>
void ScaleCopyHalf(void* dst, const void* src, std::size_t n, double factor) {
  auto* d = static_cast<std::uint16_t*>(dst);
  const auto* s = static_cast<const std::uint16_t*>(src);
  const float f = static_cast<float>(factor);
  for (std::size_t i = 0; i < n; ++i) d[i] = FromF(ToF(s[i]) * f);
}

}  // namespace

void ReduceInto(void* inout, const void* in, std::size_t count, DataType dtype, ReduceOp op) {
  switch (dtype) {
    case DataType::kFloat16:
      return ReduceHalf<Float16ToFloat, FloatToFloat16>(inout, in, count, op);
    case DataType::kBFloat16:
      return ReduceHalf<BFloat16ToFloat, FloatToBFloat16>(inout, in, count, op);
    case DataType::kFloat32: return ReduceTyped<float>(inout, in, count, op);
    case DataType::kFloat64: return ReduceTyped<double>(inout, in, count, op);
    case DataType::kInt32: return ReduceTyped<std::int32_t>(inout, in, count, op);
    case DataType::kInt64: return ReduceTyped<std::int64_t>(inout, in, count, op);
    case DataType::kUInt8: return ReduceTyped<std::uint8_t>(inout, in, count, op);
    case DataType::kBool:  // stored as 0/1 bytes: min is and, max is or
      return ReduceTyped<std::uint8_t>(inout, in, count, op);
  }
}

void ScaleCopy(void* dst, const void* src, std::size_t count, DataType dtype, double factor) {
  switch (dtype) {
    case DataType::kFloat16:
      return ScaleCopyHalf<Float16ToFloat, FloatToFloat16>(dst, src, count, factor);
    case DataType::kBFloat16:
      return ScaleCopyHalf<BFloat16ToFloat, FloatToBFloat16>(dst, src, count, factor);
    case DataType::kFloat32: return ScaleCopyTyped<float>(dst, src, count, factor);
    case DataType::kFloat64: return ScaleCopyTyped<double>(dst, src, count, factor);
    default:
      TFMPI_ENFORCE(false, "ScaleCopy on non-floating dtype {}", DataTypeName(dtype));
  }
}

void ScaleBuffer(void* buf, std::size_t count, DataType dtype, double factor) {
  ScaleCopy(buf, buf, count, dtype, factor);
}

}  // namespace tfmpi
