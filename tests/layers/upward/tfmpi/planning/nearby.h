// Fixture for tests/layers: a header of the planning layer, included relatively.
#pragma once
