// Fixture for tests/layers: an engine header that planning must not include.
#pragma once
