// Reads and writes single elements of any DataType as doubles, so a test can
// state its inputs and expected values once for every dtype. Shared by the
// logic and MPI tiers. Integers are rounded to nearest; uint8 wraps modulo 256
// like the engine's uint8 arithmetic.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tfmpi/common/half.h"
#include "tfmpi/common/types.h"

namespace tfmpi::testing {

inline void StoreAs(DataType dtype, void* base, std::size_t i, double v) {
  auto* p = static_cast<unsigned char*>(base) + i * DataTypeSize(dtype);
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof x); };
  switch (dtype) {
    case DataType::kFloat16: return put(FloatToFloat16(static_cast<float>(v)));
    case DataType::kBFloat16: return put(FloatToBFloat16(static_cast<float>(v)));
    case DataType::kFloat32: return put(static_cast<float>(v));
    case DataType::kFloat64: return put(v);
    case DataType::kInt32: return put(static_cast<std::int32_t>(std::llround(v)));
    case DataType::kInt64: return put(static_cast<std::int64_t>(std::llround(v)));
    case DataType::kUInt8: return put(static_cast<std::uint8_t>(std::llround(v)));
    case DataType::kBool: return put(static_cast<std::uint8_t>(v != 0));
  }
}

inline double LoadAs(DataType dtype, const void* base, std::size_t i) {
  const auto* p = static_cast<const unsigned char*>(base) + i * DataTypeSize(dtype);
  auto get = [p](auto x) {
    std::memcpy(&x, p, sizeof x);
    return x;
  };
  switch (dtype) {
    case DataType::kFloat16: return Float16ToFloat(get(std::uint16_t{}));
    case DataType::kBFloat16: return BFloat16ToFloat(get(std::uint16_t{}));
    case DataType::kFloat32: return get(float{});
    case DataType::kFloat64: return get(double{});
    case DataType::kInt32: return get(std::int32_t{});
    case DataType::kInt64: return static_cast<double>(get(std::int64_t{}));
    case DataType::kUInt8: return get(std::uint8_t{});
    case DataType::kBool: return get(std::uint8_t{});  // raw: a stray byte is not 0/1
  }
  return 0;
}

// Relative spacing of the dtype near 1: tolerance for results that involve a
// rounded division (average); zero for exact types.
inline double Epsilon(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return 1.0 / 1024;
    case DataType::kBFloat16: return 1.0 / 128;
    case DataType::kFloat32: return 1.0 / (1 << 23);
    case DataType::kFloat64: return 1.0 / (std::int64_t{1} << 52);
    default: return 0;
  }
}

}  // namespace tfmpi::testing
