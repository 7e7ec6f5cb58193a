// Splitting one CSV record into fields (Note [CSV records] in csv_index.h) and
// parsing a field as a typed value.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tfmpi/data/element_type.h"

namespace tfmpi::data {

struct CsvSplitError {
  std::size_t offset = 0;  // byte offset in the record
  std::string reason;
};

// Splits the record at the start of `bytes` (up to its newline outside quotes,
// or the end of `bytes`) into unquoted field values. Returns false, with
// *error filled, for a quote inside an unquoted field or text after a
// closing quote.
bool SplitCsvRecord(std::string_view bytes, char delimiter, std::vector<std::string>* fields,
                    CsvSplitError* error);

// Parses `field` (surrounding spaces and tabs ignored) as `type` into `out`
// (ElementSize(type) bytes). Integers must fit their type; bool is
// true/false/1/0 (any case). False when the field does not parse.
bool ParseCsvValue(std::string_view field, ElementType type, void* out);

}  // namespace tfmpi::data
