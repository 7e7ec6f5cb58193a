// Fixture for tests/layers: an include that is allowed.
#pragma once

#include "tfmpi/common/status.h"
