// Keeps the numpy arrays of a collective alive until the engine is done with
// them, even when their Handle is dropped first.
//
// Note [Python buffers in flight]
// The engine thread reads and writes the arrays' memory, and it never holds
// the GIL, so it must never own or release a Python object. A Handle owns its
// arrays while the request is in flight. If the handle goes first (garbage
// collected, or dropped after wait() timed out or was interrupted by Ctrl-C),
// its destructor, which runs with the GIL held, hands the arrays to
// KeepAlive instead of releasing them. KeepAlive releases them, GIL held,
// once the request has completed: at the next Reap(), which runs whenever a
// collective is submitted, a handle is dropped, or tfmpi shuts down (every
// request has completed by then). So no array is freed while the engine may
// still write into it, and the engine thread never touches a Python object.
#pragma once

#include <pybind11/pybind11.h>

#include <vector>

#include "tfmpi/engine/completion.h"

namespace tfmpi::bindings {

namespace py = pybind11;

class KeepAlive {
 public:
  // Holds `objects` until `completion` is done. GIL held.
  static void Adopt(const Completion& completion, std::vector<py::object> objects);
  // Releases the objects of completed requests. GIL held.
  static void Reap();
};

}  // namespace tfmpi::bindings
