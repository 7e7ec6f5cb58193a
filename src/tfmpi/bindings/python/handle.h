// Handle: what an asynchronous Python collective returns. It keeps the numpy
// arrays involved alive until the engine is done with them, even past its
// own end (Note [Python buffers in flight], keep_alive.h); wait() releases
// the GIL while blocking and still answers Ctrl-C.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <vector>

#include "tfmpi/engine/completion.h"
#include "tfmpi/engine/request.h"

namespace tfmpi::bindings {

namespace py = pybind11;

// Output storage for an allgather, filled on the background thread (no GIL).
struct GatherOutput {
  Shape shape;
  std::vector<char> data;
};

class Handle {
 public:
  Handle(std::string name, Completion completion, py::object input, py::object output,
         std::shared_ptr<GatherOutput> gather, py::dtype dtype)
      : name_(std::move(name)),
        completion_(std::move(completion)),
        input_(std::move(input)),
        output_(std::move(output)),
        gather_(std::move(gather)),
        dtype_(std::move(dtype)) {}
  ~Handle();  // GIL held (Python drops handles)
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  const std::string& name() const { return name_; }
  bool done() const { return completion_.done(); }
  // Blocks until the collective completes; returns its result array (None for
  // a barrier). Raises the tfmpi error on failure, TimeoutError on timeout.
  py::object Wait(double timeout_seconds);

 private:
  std::string name_;
  Completion completion_;
  py::object input_;
  py::object output_;
  std::shared_ptr<GatherOutput> gather_;
  py::dtype dtype_;
  bool consumed_ = false;
};

}  // namespace tfmpi::bindings
