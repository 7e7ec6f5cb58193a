// The process-wide engine that the Python API (and the TensorFlow ops) share.
// It lives in the shared core library so every extension module in the
// process sees the same one.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tfmpi/common/params.h"
#include "tfmpi/engine/engine.h"

namespace tfmpi {

// Resolves TFMPI_* options through `lookup` and starts the MPI engine;
// `caller_settings` join the settings every rank must share
// (EngineOptions::caller_settings). Idempotent while running (the settings of
// a later call are not checked). After ShutdownGlobalEngine() it fails: MPI
// can't be initialised twice in one process.
Status InitGlobalEngine(const EnvLookup& lookup,
                        std::vector<std::pair<std::string, std::string>> caller_settings = {});

// Collective shutdown (see Engine::Shutdown). No-op if not running.
void ShutdownGlobalEngine();

// Engine::SetExitReason on the running engine; no-op if not running.
void SetGlobalExitReason(const std::string& reason);

// The running engine, or nullptr with *why set ("not initialised: call
// tfmpi.init() first" / "has been shut down").
Engine* GlobalEngine(Status* why);

}  // namespace tfmpi
