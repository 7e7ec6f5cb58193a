// Registers the work-share planner's functions in the _core module.
#pragma once

#include <pybind11/pybind11.h>

namespace tfmpi::bindings {

void RegisterPlanning(pybind11::module_& m);

}  // namespace tfmpi::bindings
