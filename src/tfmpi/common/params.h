// A typed registry of every tunable knob (TFMPI_* environment variables).
//
// Each parameter has a name, a type, a default, an accepted range and a
// description; the registry parses values, rejects invalid ones with a message
// naming the variable, the value and what is accepted, and prints itself as a
// table (`python -m tfmpi.params`). The registry never reads the environment
// itself: callers hand it a lookup function, so tests can feed any values.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tfmpi/common/status.h"

namespace tfmpi {

enum class ParamType { kInt, kBytes, kDouble, kBool, kString, kChoice };

struct ParamSpec {
  std::string name;  // "TFMPI_FUSION_THRESHOLD"
  ParamType type;
  std::string default_value;  // as text, parsed like user input
  double min = 0;             // inclusive range for kInt, kBytes, kDouble
  double max = 0;
  std::vector<std::string> choices;  // for kChoice
  std::string description;
  std::vector<std::string> aliases;  // deprecated names still accepted
};

// A parsed value: numbers as int64/double, everything else as text.
struct ParamValue {
  std::int64_t i = 0;
  double d = 0;
  bool b = false;
  std::string s;
  bool from_environment = false;
};

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

class ParamRegistry {
 public:
  explicit ParamRegistry(std::vector<ParamSpec> specs);

  const std::vector<ParamSpec>& specs() const { return specs_; }

  // Parses every parameter (value from `lookup`, else the default). On error,
  // the Status has a line for each invalid value set (all of them, not only the
  // first), naming the variable, the offending value and what is accepted.
  Status Resolve(const EnvLookup& lookup, std::map<std::string, ParamValue>* out) const;

  // Parses one textual value for `spec`.
  static Status Parse(const ParamSpec& spec, const std::string& text, ParamValue* out);
  static std::string TypeName(const ParamSpec& spec);
  static std::string AcceptedText(const ParamSpec& spec);

  // Aligned table: name, type, default, accepted, current value, description.
  std::string Table(const EnvLookup& lookup) const;

 private:
  std::vector<ParamSpec> specs_;
};

}  // namespace tfmpi
