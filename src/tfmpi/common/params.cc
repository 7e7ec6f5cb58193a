#include "tfmpi/common/params.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace tfmpi {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string Trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Parses a whole decimal integer, or (bytes) one with a K/M/G/T suffix of 1024.
bool ParseInteger(const std::string& text, bool allow_suffix, std::int64_t* out) {
  std::string t = Trim(text);
  if (t.empty()) return false;
  std::int64_t mult = 1;
  if (allow_suffix) {
    std::string l = Lower(t);
    if (l.size() > 3 && l.compare(l.size() - 2, 2, "ib") == 0) l.erase(l.size() - 2);  // "MiB"
    else if (l.size() > 2 && l.back() == 'b' && std::isalpha(static_cast<unsigned char>(l[l.size() - 2]))) l.pop_back();  // "MB"
    char last = l.back();
    const std::string units = "kmgt";
    auto pos = units.find(last);
    if (pos != std::string::npos) {
      for (std::size_t k = 0; k <= pos; ++k) mult *= 1024;
      l.pop_back();
    }
    t = l;
  }
  if (t.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (errno != 0 || end == t.c_str() || *end != '\0') return false;
  if (v != 0 && (v > INT64_MAX / mult || v < INT64_MIN / mult)) return false;
  *out = static_cast<std::int64_t>(v) * mult;
  return true;
}

std::string FormatNumber(double v) {
  if (std::fabs(v) >= 1e15) return fmt::format("{:.3g}", v);
  if (v == std::floor(v)) return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{}", v);
}

}  // namespace

ParamRegistry::ParamRegistry(std::vector<ParamSpec> specs) : specs_(std::move(specs)) {}

std::string ParamRegistry::TypeName(const ParamSpec& spec) {
  switch (spec.type) {
    case ParamType::kInt: return "int";
    case ParamType::kBytes: return "bytes";
    case ParamType::kDouble: return "float";
    case ParamType::kBool: return "bool";
    case ParamType::kString: return "string";
    case ParamType::kChoice: return "choice";
  }
  return "?";
}

std::string ParamRegistry::AcceptedText(const ParamSpec& spec) {
  switch (spec.type) {
    case ParamType::kInt:
      return fmt::format("an integer in [{}, {}]", FormatNumber(spec.min), FormatNumber(spec.max));
    case ParamType::kBytes:
      return fmt::format("a byte count in [{}, {}], optionally with K/M/G/T suffix (x1024)",
                         FormatNumber(spec.min), FormatNumber(spec.max));
    case ParamType::kDouble:
      return fmt::format("a number in [{}, {}]", FormatNumber(spec.min), FormatNumber(spec.max));
    case ParamType::kBool: return "one of 1, 0, true, false, yes, no, on, off";
    case ParamType::kString: return "any text";
    case ParamType::kChoice: return fmt::format("one of {}", fmt::join(spec.choices, ", "));
  }
  return "";
}

Status ParamRegistry::Parse(const ParamSpec& spec, const std::string& text, ParamValue* out) {
  auto reject = [&]() {
    return Status::InvalidArgument(fmt::format("invalid value '{}' for {}: expected {}", text,
                                               spec.name, AcceptedText(spec)));
  };
  switch (spec.type) {
    case ParamType::kInt:
    case ParamType::kBytes: {
      std::int64_t v;
      if (!ParseInteger(text, spec.type == ParamType::kBytes, &v)) return reject();
      if (static_cast<double>(v) < spec.min || static_cast<double>(v) > spec.max) return reject();
      out->i = v;
      out->d = static_cast<double>(v);
      return Status::Ok();
    }
    case ParamType::kDouble: {
      std::string t = Trim(text);
      errno = 0;
      char* end = nullptr;
      double v = std::strtod(t.c_str(), &end);
      if (t.empty() || errno != 0 || *end != '\0' || !std::isfinite(v)) return reject();
      if (v < spec.min || v > spec.max) return reject();
      out->d = v;
      return Status::Ok();
    }
    case ParamType::kBool: {
      std::string l = Lower(Trim(text));
      if (l == "1" || l == "true" || l == "yes" || l == "on") out->b = true;
      else if (l == "0" || l == "false" || l == "no" || l == "off") out->b = false;
      else return reject();
      return Status::Ok();
    }
    case ParamType::kString:
      out->s = text;
      return Status::Ok();
    case ParamType::kChoice: {
      std::string l = Lower(Trim(text));
      if (std::find(spec.choices.begin(), spec.choices.end(), l) == spec.choices.end())
        return reject();
      out->s = l;
      return Status::Ok();
    }
  }
  return reject();
}

Status ParamRegistry::Resolve(const EnvLookup& lookup,
                              std::map<std::string, ParamValue>* out) const {
  std::vector<std::string> invalid;  // every set value that does not parse, in registry order
  for (const ParamSpec& spec : specs_) {
    std::optional<std::string> text = lookup(spec.name);
    for (const std::string& alias : spec.aliases) {
      if (text) break;
      text = lookup(alias);
    }
    ParamValue value;
    if (text) {
      Status s = Parse(spec, *text, &value);
      if (!s.ok()) {
        invalid.push_back(s.message());
        continue;
      }
      value.from_environment = true;
    } else {
      Status s = Parse(spec, spec.default_value, &value);
      if (!s.ok())
        return Status::Internal(fmt::format("default of {} is invalid: {}", spec.name, s.message()));
    }
    (*out)[spec.name] = value;
  }
  if (!invalid.empty()) return Status::InvalidArgument(fmt::format("{}", fmt::join(invalid, "\n")));
  return Status::Ok();
}

std::string ParamRegistry::Table(const EnvLookup& lookup) const {
  std::vector<std::array<std::string, 5>> rows;
  rows.push_back({"NAME", "TYPE", "DEFAULT", "CURRENT", "ACCEPTED"});
  for (const ParamSpec& spec : specs_) {
    std::optional<std::string> cur = lookup(spec.name);
    rows.push_back({spec.name, TypeName(spec),
                    spec.default_value.empty() ? "(empty)" : spec.default_value,
                    cur ? *cur : "(default)", AcceptedText(spec)});
  }
  std::array<std::size_t, 5> width{};
  for (const auto& r : rows)
    for (std::size_t c = 0; c < 4; ++c) width[c] = std::max(width[c], r[c].size());
  std::string out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    out += fmt::format("{:<{}}  {:<{}}  {:<{}}  {:<{}}  {}\n", r[0], width[0], r[1], width[1],
                       r[2], width[2], r[3], width[3], r[4]);
    if (i > 0) out += fmt::format("    {}\n", specs_[i - 1].description);
  }
  return out;
}

}  // namespace tfmpi
