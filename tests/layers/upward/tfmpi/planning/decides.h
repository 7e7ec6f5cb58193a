// Fixture for tests/layers: a planning header that reaches up into the engine.
#pragma once

#include "tfmpi/common/types.h"
#include "tfmpi/engine/engine.h"
