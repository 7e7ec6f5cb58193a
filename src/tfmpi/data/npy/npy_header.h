// The header of a .npy file (numpy's format, versions 1.0 to 3.0): the
// element type, the memory order and the shape, parsed from the Python-literal
// dictionary that follows the magic string.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tfmpi/common/status.h"
#include "tfmpi/data/element_type.h"

namespace tfmpi::data {

struct NpyHeader {
  ElementType type = ElementType::kFloat32;
  std::vector<std::int64_t> shape;
};

// `prefix` is the start of the file (at least the magic, the version and the
// header length: 12 bytes). Sets *dict_offset and *header_end to where the
// dictionary starts and ends; the data starts at *header_end.
Status ParseNpyPreamble(const std::string& path, std::string_view prefix,
                        std::int64_t* dict_offset, std::int64_t* header_end);

// Parses "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }".
// Unsupported: big-endian, Fortran order, structured or non-numeric dtypes,
// 0-d arrays; each is an InvalidArgument naming the file.
Status ParseNpyDict(const std::string& path, std::string_view dict, NpyHeader* out);

}  // namespace tfmpi::data
