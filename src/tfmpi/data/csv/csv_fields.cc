#include "tfmpi/data/csv/csv_fields.h"

#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tfmpi::data {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

template <typename T>
bool ParseNumber(std::string_view s, void* out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  T value{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return false;
  std::memcpy(out, &value, sizeof(T));
  return true;
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
    if (x != b[i]) return false;
  }
  return true;
}

}  // namespace

bool SplitCsvRecord(std::string_view bytes, char delimiter, std::vector<std::string>* fields,
                    CsvSplitError* error) {
  fields->clear();
  std::string field;
  std::size_t i = 0;
  const std::size_t n = bytes.size();
  for (;;) {
    field.clear();
    if (i < n && bytes[i] == '"') {
      std::size_t open = i++;
      for (;;) {
        if (i >= n) {
          *error = {open, "a quoted field is never closed"};
          return false;
        }
        if (bytes[i] == '"') {
          if (i + 1 < n && bytes[i + 1] == '"') {
            field.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field.push_back(bytes[i++]);
      }
      bool at_end = i >= n || bytes[i] == delimiter || bytes[i] == '\n' ||
                    (bytes[i] == '\r' && (i + 1 >= n || bytes[i + 1] == '\n'));
      if (!at_end) {
        *error = {i, "text after the closing quote of a quoted field"};
        return false;
      }
    } else {
      while (i < n && bytes[i] != delimiter && bytes[i] != '\n') {
        if (bytes[i] == '"') {
          *error = {i, "a quote inside an unquoted field"};
          return false;
        }
        field.push_back(bytes[i++]);
      }
      if (!field.empty() && field.back() == '\r' && (i >= n || bytes[i] == '\n')) {
        field.pop_back();
      }
    }
    fields->push_back(field);
    if (i < n && bytes[i] == delimiter) {
      ++i;
      continue;
    }
    if (i < n && bytes[i] == '\r') ++i;
    return true;
  }
}

bool ParseCsvValue(std::string_view field, ElementType type, void* out) {
  std::string_view s = Trim(field);
  switch (type) {
    case ElementType::kBool: {
      bool v;
      if (s == "1" || EqualsIgnoringCase(s, "true")) {
        v = true;
      } else if (s == "0" || EqualsIgnoringCase(s, "false")) {
        v = false;
      } else {
        return false;
      }
      std::memcpy(out, &v, 1);
      return true;
    }
    case ElementType::kInt8: return ParseNumber<std::int8_t>(s, out);
    case ElementType::kInt16: return ParseNumber<std::int16_t>(s, out);
    case ElementType::kInt32: return ParseNumber<std::int32_t>(s, out);
    case ElementType::kInt64: return ParseNumber<std::int64_t>(s, out);
    case ElementType::kUInt8: return ParseNumber<std::uint8_t>(s, out);
    case ElementType::kUInt16: return ParseNumber<std::uint16_t>(s, out);
    case ElementType::kUInt32: return ParseNumber<std::uint32_t>(s, out);
    case ElementType::kUInt64: return ParseNumber<std::uint64_t>(s, out);
    case ElementType::kFloat32: return ParseNumber<float>(s, out);
    case ElementType::kFloat64: return ParseNumber<double>(s, out);
    case ElementType::kFloat16: return false;  // rejected when the reader opens
  }
  return false;
}

}  // namespace tfmpi::data
