// The settings every rank must share (Note [Settings every rank shares],
// planning/settings_agreement.h), checked before the engine serves anything.
#pragma once

#include "tfmpi/common/status.h"
#include "tfmpi/engine/options.h"
#include "tfmpi/planning/settings_agreement.h"
#include "tfmpi/transport/communicator.h"

namespace tfmpi {

// The tfmpi version, the engine settings that shape collectives (fusion,
// direct and message sizes, the response cache, autotune and what it may
// tune, skipped data), then options.caller_settings.
planning::Settings SharedSettings(const EngineOptions& options);

// Collective over `comm`: rank 0 gathers every rank's `mine` and compares
// them; when they differ every rank returns InvalidArgument (rank 0 with
// the differences, the others pointing to rank 0's message) and sets
// *disagreed. A transport failure returns its status, *disagreed untouched.
Status AgreeOnSettings(Communicator* comm, const planning::Settings& mine, bool* disagreed);

}  // namespace tfmpi
