// Element types a row reader can produce: the numeric types of numpy, HDF5 and
// typed CSV columns, named as numpy and TensorFlow spell them ("float32").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tfmpi::data {

enum class ElementType : std::uint8_t {
  kBool, kInt8, kInt16, kInt32, kInt64, kUInt8, kUInt16, kUInt32, kUInt64,
  kFloat16, kFloat32, kFloat64,
};

std::size_t ElementSize(ElementType type);
const char* ElementTypeName(ElementType type);  // "float32"
std::optional<ElementType> ParseElementType(std::string_view name);

}  // namespace tfmpi::data
