// The engine's MPI communicator factory: initialises MPI if needed (on the
// calling thread, the engine's background thread) and duplicates MPI_COMM_WORLD.
#pragma once

#include "tfmpi/engine/engine.h"
#include "tfmpi/engine/options.h"

namespace tfmpi {

CommunicatorFactory MakeMpiCommunicatorFactory(const EngineOptions& options);

}  // namespace tfmpi
