#include "tfmpi/data/npy/npy_header.h"

#include <cctype>
#include <charconv>

#include <fmt/format.h>

namespace tfmpi::data {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

std::uint32_t LittleEndian(std::string_view bytes) {
  std::uint32_t v = 0;
  for (std::size_t i = bytes.size(); i-- > 0;) {
    v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  }
  return v;
}

// The text after "'key':", leading spaces skipped; empty if the key is absent.
std::string_view ValueOf(std::string_view dict, std::string_view key) {
  std::string quoted = fmt::format("'{}'", key);
  std::size_t at = dict.find(quoted);
  if (at == std::string_view::npos) return {};
  std::size_t colon = dict.find(':', at + quoted.size());
  if (colon == std::string_view::npos) return {};
  std::string_view rest = dict.substr(colon + 1);
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front()))) {
    rest.remove_prefix(1);
  }
  return rest;
}

Status ParseDescr(const std::string& path, std::string_view value, ElementType* out) {
  if (value.empty() || value.front() != '\'') {
    return Status::InvalidArgument(fmt::format(
        "{}: unsupported npy dtype (a structured dtype?): only plain numeric arrays are read",
        path));
  }
  std::size_t close = value.find('\'', 1);
  if (close == std::string_view::npos) {
    return Status::DataLoss(fmt::format("{}: corrupt npy header: unterminated 'descr'", path));
  }
  std::string_view descr = value.substr(1, close - 1);
  auto unsupported = [&](const char* why) {
    return Status::InvalidArgument(
        fmt::format("{}: unsupported npy dtype '{}': {}", path, descr, why));
  };
  if (descr.size() < 3) return unsupported("not a numeric type");
  char order = descr[0];
  if (order == '>') return unsupported("big-endian data is not supported");
  if (order != '<' && order != '|' && order != '=') return unsupported("unknown byte order");
  char kind = descr[1];
  std::string_view size = descr.substr(2);
  std::string name;
  if (kind == 'b' && size == "1") {
    name = "bool";
  } else if (kind == 'i' || kind == 'u' || kind == 'f') {
    int bytes = 0;
    auto [p, ec] = std::from_chars(size.data(), size.data() + size.size(), bytes);
    if (ec != std::errc() || p != size.data() + size.size()) return unsupported("bad size");
    name = fmt::format("{}{}", kind == 'i' ? "int" : kind == 'u' ? "uint" : "float", bytes * 8);
  }
  auto type = ParseElementType(name);
  if (!type) {
    return unsupported(
        "use bool, int8..int64, uint8..uint64, float16, float32 or float64");
  }
  *out = *type;
  return Status::Ok();
}

Status ParseShape(const std::string& path, std::string_view value,
                  std::vector<std::int64_t>* out) {
  auto corrupt = [&](const char* why) {
    return Status::DataLoss(fmt::format("{}: corrupt npy header: 'shape' {}", path, why));
  };
  if (value.empty() || value.front() != '(') return corrupt("is not a tuple");
  std::size_t close = value.find(')');
  if (close == std::string_view::npos) return corrupt("is not a closed tuple");
  std::string_view body = value.substr(1, close - 1);
  out->clear();
  std::size_t i = 0;
  while (i < body.size()) {
    char c = body[i];
    if (c == ' ' || c == ',') {
      ++i;
      continue;
    }
    std::int64_t dim = 0;
    auto [p, ec] = std::from_chars(body.data() + i, body.data() + body.size(), dim);
    if (ec != std::errc() || dim < 0) return corrupt("has a dimension that is not a count");
    out->push_back(dim);
    i = static_cast<std::size_t>(p - body.data());
    if (i < body.size() && body[i] == 'L') ++i;  // Python 2 longs
  }
  return Status::Ok();
}

}  // namespace

Status ParseNpyPreamble(const std::string& path, std::string_view prefix,
                        std::int64_t* dict_offset, std::int64_t* header_end) {
  if (prefix.size() < 10 || prefix.substr(0, kMagic.size()) != kMagic) {
    return Status::DataLoss(fmt::format(
        "{}: not an npy file (no \\x93NUMPY magic at byte 0, or the file is truncated)",
        path));
  }
  int major = static_cast<unsigned char>(prefix[6]);
  if (major == 1) {
    *dict_offset = 10;
    *header_end = 10 + LittleEndian(prefix.substr(8, 2));
  } else if (major == 2 || major == 3) {
    if (prefix.size() < 12) {
      return Status::DataLoss(fmt::format("{}: npy file is truncated in its header", path));
    }
    *dict_offset = 12;
    *header_end = 12 + static_cast<std::int64_t>(LittleEndian(prefix.substr(8, 4)));
  } else {
    return Status::InvalidArgument(
        fmt::format("{}: unsupported npy format version {}.x", path, major));
  }
  return Status::Ok();
}

Status ParseNpyDict(const std::string& path, std::string_view dict, NpyHeader* out) {
  TFMPI_RETURN_IF_ERROR(ParseDescr(path, ValueOf(dict, "descr"), &out->type));
  std::string_view fortran = ValueOf(dict, "fortran_order");
  if (fortran.substr(0, 4) == "True") {
    return Status::InvalidArgument(fmt::format(
        "{}: Fortran-ordered npy arrays are not supported; save with "
        "np.save(path, np.ascontiguousarray(a))",
        path));
  }
  if (fortran.substr(0, 5) != "False") {
    return Status::DataLoss(fmt::format("{}: corrupt npy header: no 'fortran_order'", path));
  }
  TFMPI_RETURN_IF_ERROR(ParseShape(path, ValueOf(dict, "shape"), &out->shape));
  if (out->shape.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: a 0-d npy array has no rows; save an array of rank >= 1", path));
  }
  return Status::Ok();
}

}  // namespace tfmpi::data
