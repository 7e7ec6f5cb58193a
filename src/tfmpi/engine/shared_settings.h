// The settings every rank must share (Note [Settings every rank shares],
// planning/settings_agreement.h), checked before the engine serves anything.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tfmpi/common/status.h"
#include "tfmpi/engine/options.h"
#include "tfmpi/planning/settings_agreement.h"
#include "tfmpi/transport/communicator.h"

namespace tfmpi {

// The tfmpi version, the engine settings that shape collectives (fusion,
// direct and message sizes in effect at `world_size` ranks, the response
// cache, heartbeats on or off, autotune and what it may search, skipped
// data), then options.caller_settings.
planning::Settings SharedSettings(const EngineOptions& options, int world_size);

// The engine's TFMPI_* parameters that each rank may set for itself: they
// change nothing another rank sees (logging, the timeline, cycle pacing,
// stall reports, the heartbeat timeout beyond on/off, the autotune log and
// time limit, which the ranks agree on by a maximum). Every other parameter
// must appear in SharedSettings (tests/logic/settings_agreement_test.cc).
const std::vector<std::string>& PerRankEngineParams();

// Collective over `comm`: rank 0 gathers every rank's `mine` and compares
// them; when they differ, rank 0 hands the differences to `report` (one
// line each), then releases the others, and every rank returns
// InvalidArgument (the others pointing to rank 0's list) and sets
// *disagreed (Note [Reported before released]). A transport failure
// returns its status, *disagreed untouched. Only a one-byte verdict is
// broadcast, so ranks whose message sizes differ (a setting this checks)
// still make the same MPI calls.
Status AgreeOnSettings(Communicator* comm, const planning::Settings& mine, bool* disagreed,
                       const std::function<void(const std::string&)>& report);

}  // namespace tfmpi
