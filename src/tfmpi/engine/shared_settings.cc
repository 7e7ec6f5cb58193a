#include "tfmpi/engine/shared_settings.h"

#include <fmt/format.h>

#include <string>
#include <vector>

namespace tfmpi {

planning::Settings SharedSettings(const EngineOptions& o) {
  planning::Settings s = {
      {"tfmpi version", TFMPI_VERSION_STRING},
      {"TFMPI_FUSION_THRESHOLD", std::to_string(o.fusion_threshold)},
      {"TFMPI_DIRECT_THRESHOLD", std::to_string(o.direct_threshold)},
      {"TFMPI_MAX_MESSAGE_ELEMENTS", std::to_string(o.max_message_elements)},
      {"TFMPI_CACHE_CAPACITY", std::to_string(o.cache_capacity)},
      {"TFMPI_SKIP_DATA", o.skip_data ? "1" : "0"},
      {"TFMPI_AUTOTUNE", o.autotune.enabled ? "1" : "0"},
  };
  if (o.autotune.enabled) {
    // A value set in the environment is kept, one left to the default is
    // searched: ranks that differ in which they set search different things.
    std::vector<std::string> tuned;
    if (!o.autotune.fixed_message) tuned.push_back("TFMPI_MAX_MESSAGE_ELEMENTS");
    if (!o.autotune.fixed_direct) tuned.push_back("TFMPI_DIRECT_THRESHOLD");
    if (!o.autotune.fixed_fusion) tuned.push_back("TFMPI_FUSION_THRESHOLD");
    s.emplace_back("what TFMPI_AUTOTUNE searches (the settings not set)",
                   tuned.empty() ? "nothing" : fmt::format("{}", fmt::join(tuned, ", ")));
    s.emplace_back("TFMPI_AUTOTUNE_SECONDS", fmt::format("{}", o.autotune.max_seconds));
  }
  s.insert(s.end(), o.caller_settings.begin(), o.caller_settings.end());
  return s;
}

Status AgreeOnSettings(Communicator* comm, const planning::Settings& mine, bool* disagreed) {
  std::vector<std::string> all;
  TFMPI_RETURN_IF_ERROR(comm->GatherToRoot(planning::EncodeSettings(mine), &all));
  std::string verdict = comm->rank() == 0 ? planning::SettingsDisagreement(all) : "";
  TFMPI_RETURN_IF_ERROR(comm->BroadcastFromRoot(&verdict));
  if (verdict.empty()) return Status::Ok();
  *disagreed = true;
  if (comm->rank() == 0) return Status::InvalidArgument(verdict);
  return Status::InvalidArgument(
      "the ranks were started with different settings (rank 0 lists them): every rank must "
      "share the settings that shape collectives and the training math");
}

}  // namespace tfmpi
