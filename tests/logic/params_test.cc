// ParamRegistry and ResolveEngineOptions: defaults, parsing of every type,
// and rejection messages that name the variable, the value and what is accepted.
#include "tfmpi/common/params.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "tfmpi/engine/options.h"
#include "contains.h"

namespace tfmpi {
namespace {

using testing::Contains;


// An environment made of a map, so tests never touch the real one.
EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

Status Resolve(std::map<std::string, std::string> vars, EngineOptions* out) {
  return ResolveEngineOptions(Env(std::move(vars)), out);
}

std::size_t FusionThresholdFor(const std::string& text) {
  EngineOptions o;
  const Status s = Resolve({{"TFMPI_FUSION_THRESHOLD", text}}, &o);
  EXPECT_TRUE(s.ok()) << text << ": " << s.ToString();
  return o.fusion_threshold;
}

TEST(ResolveEngineOptions, DefaultsWhenNothingIsSet) {
  EngineOptions o;
  o.fusion_threshold = 1;  // every field is overwritten
  o.cycle_time_ms = 99;
  o.log_level = LogLevel::kTrace;
  ASSERT_TRUE(Resolve({}, &o).ok());
  EXPECT_EQ(o.fusion_threshold, 64u << 20);
  EXPECT_EQ(o.direct_threshold, 1u << 20);
  EXPECT_DOUBLE_EQ(o.cycle_time_ms, 5.0);
  EXPECT_EQ(o.cache_capacity, 1024u);
  EXPECT_EQ(o.timeline_path, "");
  EXPECT_DOUBLE_EQ(o.stall_warning_seconds, 60);
  EXPECT_EQ(o.max_message_elements, 0u);  // chosen per world size
  EXPECT_EQ(o.log_level, LogLevel::kWarning);
}

TEST(ResolveEngineOptions, RegistryDefaultsMatchTheStructDefaults) {
  EngineOptions resolved;
  ASSERT_TRUE(Resolve({}, &resolved).ok());
  const EngineOptions plain;
  EXPECT_EQ(resolved.fusion_threshold, plain.fusion_threshold);
  EXPECT_EQ(resolved.direct_threshold, plain.direct_threshold);
  EXPECT_EQ(resolved.cycle_time_ms, plain.cycle_time_ms);
  EXPECT_EQ(resolved.cache_capacity, plain.cache_capacity);
  EXPECT_EQ(resolved.stall_warning_seconds, plain.stall_warning_seconds);
  EXPECT_EQ(resolved.max_message_elements, plain.max_message_elements);
  EXPECT_EQ(resolved.log_level, plain.log_level);
}

TEST(ResolveEngineOptions, EveryVariableIsRead) {
  EngineOptions o;
  ASSERT_TRUE(Resolve({{"TFMPI_FUSION_THRESHOLD", "1000"},
                       {"TFMPI_DIRECT_THRESHOLD", "200"},
                       {"TFMPI_CYCLE_TIME_MS", "2.5"},
                       {"TFMPI_CACHE_CAPACITY", "0"},
                       {"TFMPI_TIMELINE", "/tmp/t.json"},
                       {"TFMPI_STALL_WARNING_SECONDS", "0"},
                       {"TFMPI_MAX_MESSAGE_ELEMENTS", "1024"},
                       {"TFMPI_LOG_LEVEL", "DEBUG"}},
                      &o)
                  .ok());
  EXPECT_EQ(o.fusion_threshold, 1000u);
  EXPECT_EQ(o.direct_threshold, 200u);
  EXPECT_DOUBLE_EQ(o.cycle_time_ms, 2.5);
  EXPECT_EQ(o.cache_capacity, 0u);
  EXPECT_EQ(o.timeline_path, "/tmp/t.json");
  EXPECT_DOUBLE_EQ(o.stall_warning_seconds, 0);
  EXPECT_EQ(o.max_message_elements, 1024u);
  EXPECT_EQ(o.log_level, LogLevel::kDebug);
}

TEST(ResolveEngineOptions, AutotuneIsOffAndTunesWhatTheEnvironmentLeavesOpen) {
  EngineOptions o;
  ASSERT_TRUE(Resolve({}, &o).ok());
  EXPECT_FALSE(o.autotune.enabled);
  EXPECT_FALSE(o.autotune.fixed_message || o.autotune.fixed_direct || o.autotune.fixed_fusion);

  ASSERT_TRUE(Resolve({{"TFMPI_AUTOTUNE", "yes"},
                       {"TFMPI_AUTOTUNE_LOG", "/tmp/tune.csv"},
                       {"TFMPI_AUTOTUNE_SECONDS", "30"},
                       {"TFMPI_FUSION_THRESHOLD", "64M"}},  // the default, but chosen
                      &o)
                  .ok());
  EXPECT_TRUE(o.autotune.enabled);
  EXPECT_EQ(o.autotune.log_path, "/tmp/tune.csv");
  EXPECT_DOUBLE_EQ(o.autotune.max_seconds, 30);
  EXPECT_TRUE(o.autotune.fixed_fusion);
  EXPECT_FALSE(o.autotune.fixed_direct);
  EXPECT_FALSE(o.autotune.fixed_message);

  ASSERT_TRUE(Resolve({{"TFMPI_MAX_MESSAGE_ELEMENTS", "4096"}, {"TFMPI_DIRECT_THRESHOLD", "2M"}},
                      &o)
                  .ok());
  EXPECT_TRUE(o.autotune.fixed_message);
  EXPECT_TRUE(o.autotune.fixed_direct);
}

TEST(ResolveEngineOptions, AnInvalidAutotuneVariableNamesTheAcceptedValues) {
  EngineOptions o;
  Status s = Resolve({{"TFMPI_AUTOTUNE", "maybe"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), {"TFMPI_AUTOTUNE", "'maybe'", "1, 0, true, false"}));
  s = Resolve({{"TFMPI_AUTOTUNE_SECONDS", "0"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), {"TFMPI_AUTOTUNE_SECONDS", "[1, 86400]"}));
}

TEST(ResolveEngineOptions, SkipDataIsADiagnosticThatExcludesAutotune) {
  EngineOptions o;
  ASSERT_TRUE(Resolve({}, &o).ok());
  EXPECT_FALSE(o.skip_data);
  ASSERT_TRUE(Resolve({{"TFMPI_SKIP_DATA", "1"}}, &o).ok());
  EXPECT_TRUE(o.skip_data);
  const Status s = Resolve({{"TFMPI_SKIP_DATA", "1"}, {"TFMPI_AUTOTUNE", "1"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), {"TFMPI_SKIP_DATA", "TFMPI_AUTOTUNE"}));
}

TEST(ResolveEngineOptions, ByteSuffixesArePowersOf1024) {
  EXPECT_EQ(FusionThresholdFor("64M"), 64u << 20);
  EXPECT_EQ(FusionThresholdFor("1KiB"), 1024u);
  EXPECT_EQ(FusionThresholdFor("2k"), 2048u);
  EXPECT_EQ(FusionThresholdFor("3MB"), 3u << 20);
  EXPECT_EQ(FusionThresholdFor("1G"), std::size_t{1} << 30);
  EXPECT_EQ(FusionThresholdFor("1t"), std::size_t{1} << 40);
  EXPECT_EQ(FusionThresholdFor(" 512 "), 512u);
  EXPECT_EQ(FusionThresholdFor("0"), 0u);
}

TEST(ResolveEngineOptions, InvalidValueNamesVariableValueAndWhatIsAccepted) {
  EngineOptions o;
  const Status s = Resolve({{"TFMPI_FUSION_THRESHOLD", "lots"}}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), {"TFMPI_FUSION_THRESHOLD", "'lots'", "byte count", "K/M/G/T"}));
}

TEST(ResolveEngineOptions, EveryInvalidValueIsReportedOnALineOfItsOwn) {
  EngineOptions o;
  const Status s = Resolve({{"TFMPI_FUSION_THRESHOLD", "lots"}, {"TFMPI_CYCLE_TIME_MS", "5"},
                            {"TFMPI_LOG_LEVEL", "loud"}, {"TFMPI_CACHE_CAPACITY", "-3"}},
                           &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  const std::string& m = s.message();
  EXPECT_EQ(std::count(m.begin(), m.end(), '\n'), 2) << m;  // three lines, the valid one absent
  EXPECT_TRUE(Contains(m, {"'lots' for TFMPI_FUSION_THRESHOLD", "'loud' for TFMPI_LOG_LEVEL",
                           "'-3' for TFMPI_CACHE_CAPACITY"}));
  EXPECT_EQ(m.find("TFMPI_CYCLE_TIME_MS"), std::string::npos) << m;
}

TEST(ResolveEngineOptions, MalformedNumbersAreRejected) {
  const std::pair<const char*, const char*> cases[] = {
      {"TFMPI_FUSION_THRESHOLD", "1.5M"}, {"TFMPI_FUSION_THRESHOLD", "M"},
      {"TFMPI_FUSION_THRESHOLD", "12Q"},  {"TFMPI_FUSION_THRESHOLD", ""},
      {"TFMPI_DIRECT_THRESHOLD", "0x10"}, {"TFMPI_CACHE_CAPACITY", "10k"},
      {"TFMPI_CACHE_CAPACITY", "3.0"},    {"TFMPI_CYCLE_TIME_MS", "fast"},
      {"TFMPI_CYCLE_TIME_MS", "nan"},     {"TFMPI_CYCLE_TIME_MS", "1ms"},
      {"TFMPI_LOG_LEVEL", "verbose"},
  };
  for (const auto& [name, value] : cases) {
    EngineOptions o;
    const Status s = Resolve({{name, value}}, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << name << "=" << value;
    EXPECT_TRUE(Contains(s.message(), {name, std::string("'") + value + "'"}));
  }
}

TEST(ResolveEngineOptions, OutOfRangeIsRejectedWithTheRange) {
  struct Case {
    const char* name;
    const char* value;
    const char* accepted;
  };
  const Case cases[] = {
      {"TFMPI_CACHE_CAPACITY", "2000000", "[0, 1048576]"},
      {"TFMPI_CACHE_CAPACITY", "-1", "[0, 1048576]"},
      {"TFMPI_CYCLE_TIME_MS", "1001", "[0, 1000]"},
      {"TFMPI_CYCLE_TIME_MS", "-0.5", "[0, 1000]"},
      {"TFMPI_MAX_MESSAGE_ELEMENTS", "-1", "[0, 2147483647]"},
      {"TFMPI_FUSION_THRESHOLD", "-1K", "[0, 1099511627776]"},
      {"TFMPI_FUSION_THRESHOLD", "2T", "[0, 1099511627776]"},
      {"TFMPI_FUSION_THRESHOLD", "99999999999T", "[0, 1099511627776]"},  // overflows int64
      {"TFMPI_STALL_WARNING_SECONDS", "1e9", "[0, 86400]"},
  };
  for (const Case& c : cases) {
    EngineOptions o;
    const Status s = Resolve({{c.name, c.value}}, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.name << "=" << c.value;
    EXPECT_TRUE(Contains(s.message(), {c.name, c.value, c.accepted}));
  }
}

TEST(ResolveEngineOptions, LogLevelListsItsChoices) {
  EngineOptions o;
  const Status s = Resolve({{"TFMPI_LOG_LEVEL", "loud"}}, &o);
  EXPECT_TRUE(Contains(s.message(), {"one of trace, debug, info, warning, error, off"}));
}

ParamSpec Spec(std::string name, ParamType type, std::string def) {
  ParamSpec s;
  s.name = std::move(name);
  s.type = type;
  s.default_value = std::move(def);
  s.min = 0;
  s.max = 100;
  s.description = "test knob " + s.name;
  return s;
}

TEST(ParamRegistry, BoolSpellings) {
  const ParamSpec spec = Spec("TFMPI_FLAG", ParamType::kBool, "0");
  for (const char* yes : {"1", "true", "YES", " on "}) {
    ParamValue v;
    ASSERT_TRUE(ParamRegistry::Parse(spec, yes, &v).ok()) << yes;
    EXPECT_TRUE(v.b) << yes;
  }
  for (const char* no : {"0", "False", "no", "OFF"}) {
    ParamValue v;
    v.b = true;
    ASSERT_TRUE(ParamRegistry::Parse(spec, no, &v).ok()) << no;
    EXPECT_FALSE(v.b) << no;
  }
  ParamValue v;
  const Status s = ParamRegistry::Parse(spec, "maybe", &v);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), {"TFMPI_FLAG", "'maybe'", "one of 1, 0, true, false"}));
}

TEST(ParamRegistry, AliasesAreReadWhenThePrimaryNameIsUnset) {
  ParamSpec spec = Spec("TFMPI_NEW", ParamType::kInt, "5");
  spec.aliases = {"TFMPI_OLD"};
  const ParamRegistry registry({spec});
  std::map<std::string, ParamValue> out;
  ASSERT_TRUE(registry.Resolve(Env({{"TFMPI_OLD", "7"}}), &out).ok());
  EXPECT_EQ(out["TFMPI_NEW"].i, 7);
  EXPECT_TRUE(out["TFMPI_NEW"].from_environment);
  ASSERT_TRUE(registry.Resolve(Env({{"TFMPI_OLD", "7"}, {"TFMPI_NEW", "9"}}), &out).ok());
  EXPECT_EQ(out["TFMPI_NEW"].i, 9) << "the primary name wins";
  ASSERT_TRUE(registry.Resolve(Env({}), &out).ok());
  EXPECT_EQ(out["TFMPI_NEW"].i, 5);
  EXPECT_FALSE(out["TFMPI_NEW"].from_environment);
}

TEST(ParamRegistry, AnInvalidDefaultIsAnInternalError) {
  const ParamRegistry registry({Spec("TFMPI_BROKEN", ParamType::kInt, "five")});
  std::map<std::string, ParamValue> out;
  const Status s = registry.Resolve(Env({}), &out);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_TRUE(Contains(s.message(), {"TFMPI_BROKEN"}));
}

TEST(ParamRegistry, TableListsEveryEngineParameterWithItsDescription) {
  const std::string table = EngineParams().Table(Env({{"TFMPI_CYCLE_TIME_MS", "3"}}));
  ASSERT_FALSE(EngineParams().specs().empty());
  for (const ParamSpec& spec : EngineParams().specs()) {
    EXPECT_TRUE(Contains(table, {spec.name}));
    EXPECT_TRUE(Contains(table, {spec.description}));
    EXPECT_FALSE(spec.description.empty()) << spec.name;
  }
  EXPECT_TRUE(Contains(table, {"(default)"}));
}

TEST(MessageElementsFor, OneMebibyteAtTwoRanksGrowingWithTheRanks) {  // Note [Message size]
  EXPECT_EQ(MessageElementsFor(0, 1), 262144u);
  EXPECT_EQ(MessageElementsFor(0, 2), 262144u);
  EXPECT_EQ(MessageElementsFor(0, 4), 524288u);
  EXPECT_EQ(MessageElementsFor(0, 64), 8388608u);
  EXPECT_EQ(MessageElementsFor(0, 1 << 20), 2147483647u);  // never past one MPI count
  EXPECT_EQ(MessageElementsFor(0, 0), 262144u);
  EXPECT_EQ(MessageElementsFor(1000, 64), 1000u);  // what the user set wins
}

}  // namespace
}  // namespace tfmpi
