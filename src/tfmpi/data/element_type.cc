#include "tfmpi/data/element_type.h"

namespace tfmpi::data {
namespace {

struct Entry {
  ElementType type;
  const char* name;
  std::size_t size;
};

constexpr Entry kEntries[] = {
    {ElementType::kBool, "bool", 1},       {ElementType::kInt8, "int8", 1},
    {ElementType::kInt16, "int16", 2},     {ElementType::kInt32, "int32", 4},
    {ElementType::kInt64, "int64", 8},     {ElementType::kUInt8, "uint8", 1},
    {ElementType::kUInt16, "uint16", 2},   {ElementType::kUInt32, "uint32", 4},
    {ElementType::kUInt64, "uint64", 8},   {ElementType::kFloat16, "float16", 2},
    {ElementType::kFloat32, "float32", 4}, {ElementType::kFloat64, "float64", 8},
};

const Entry& Find(ElementType type) { return kEntries[static_cast<int>(type)]; }

}  // namespace

std::size_t ElementSize(ElementType type) { return Find(type).size; }
const char* ElementTypeName(ElementType type) { return Find(type).name; }

std::optional<ElementType> ParseElementType(std::string_view name) {
  for (const Entry& e : kEntries) {
    if (name == e.name) return e.type;
  }
  return std::nullopt;
}

}  // namespace tfmpi::data
