// Fixture for tests/layers: a planning header that reaches up into the engine
// three ways: by the layer's path, by an angle-bracket include and by a path
// relative to this folder.
#pragma once

#include <vector>

#include "tfmpi/common/types.h"
#include "tfmpi/engine/engine.h"
#include <tfmpi/engine/coordinator.h>
#include "../engine/wire.h"
#include "nearby.h"
