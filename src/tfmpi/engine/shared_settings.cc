#include "tfmpi/engine/shared_settings.h"

#include <fmt/format.h>

#include <functional>
#include <string>
#include <vector>

namespace tfmpi {

planning::Settings SharedSettings(const EngineOptions& o, int world_size) {
  planning::Settings s = {
      {"tfmpi version", TFMPI_VERSION_STRING},
      {"TFMPI_FUSION_THRESHOLD", std::to_string(o.fusion_threshold)},
      {"TFMPI_DIRECT_THRESHOLD", std::to_string(o.direct_threshold)},
      {"TFMPI_MAX_MESSAGE_ELEMENTS",
       std::to_string(MessageElementsFor(o.max_message_elements, world_size))},
      {"TFMPI_CACHE_CAPACITY", std::to_string(o.cache_capacity)},
      // A rank without heartbeats answers none (Note [Lost peers]).
      {"heartbeats (TFMPI_PEER_TIMEOUT_SECONDS > 0)", o.peer_timeout_seconds > 0 ? "on" : "off"},
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
  }
  s.insert(s.end(), o.caller_settings.begin(), o.caller_settings.end());
  return s;
}

const std::vector<std::string>& PerRankEngineParams() {
  static const std::vector<std::string> names = {
      "TFMPI_CYCLE_TIME_MS",         "TFMPI_TIMELINE",        "TFMPI_STALL_WARNING_SECONDS",
      "TFMPI_STALL_TIMEOUT_SECONDS", "TFMPI_PEER_TIMEOUT_SECONDS", "TFMPI_LOG_LEVEL",
      "TFMPI_AUTOTUNE_LOG",          "TFMPI_AUTOTUNE_SECONDS"};
  return names;
}

Status AgreeOnSettings(Communicator* comm, const planning::Settings& mine, bool* disagreed,
                       const std::function<void(const std::string&)>& report) {
  std::vector<std::string> all;
  TFMPI_RETURN_IF_ERROR(comm->GatherToRoot(planning::EncodeSettings(mine), &all));
  const std::string verdict = comm->rank() == 0 ? planning::SettingsDisagreement(all) : "";
  std::string differ = verdict.empty() ? "" : "1";
  TFMPI_RETURN_IF_ERROR(comm->BroadcastFromRoot(&differ));
  if (differ.empty()) return Status::Ok();
  *disagreed = true;
  // Note [Reported before released]
  // A rank that exits non-zero makes mpirun end the job, and rank 0's list
  // of what differs was sometimes lost when the others exited first. So rank
  // 0 writes the list, then releases the others with one more broadcast: no
  // rank can exit before the list is out.
  if (comm->rank() == 0) report(verdict);
  std::string released;
  TFMPI_RETURN_IF_ERROR(comm->BroadcastFromRoot(&released));
  if (comm->rank() == 0) {
    return Status::InvalidArgument(
        "the ranks were started with different settings (listed above): every rank must "
        "share the settings that shape collectives and the training math");
  }
  return Status::InvalidArgument(
      "the ranks were started with different settings (rank 0 lists them): every rank must "
      "share the settings that shape collectives and the training math");
}

}  // namespace tfmpi
