#include "tfmpi/bindings/python/handle.h"

#include <fmt/format.h>

#include <chrono>

#include "tfmpi/bindings/python/keep_alive.h"
#include "tfmpi/bindings/python/status_error.h"

namespace tfmpi::bindings {

Handle::~Handle() {
  // Note [Python buffers in flight]
  if (!completion_.done()) {
    try {
      KeepAlive::Adopt(completion_, {std::move(input_), std::move(output_)});
    } catch (...) {  // out of memory: leak the arrays rather than free them under the engine
      (void)input_.release();
      (void)output_.release();
    }
  }
  KeepAlive::Reap();
}

py::object Handle::Wait(double timeout_seconds) {
  using namespace std::chrono;
  const auto deadline = steady_clock::now() + duration_cast<steady_clock::duration>(
                                                  duration<double>(timeout_seconds < 0 ? 1e9 : timeout_seconds));
  Status status;
  while (true) {
    bool finished;
    {
      py::gil_scoped_release release;
      finished = completion_.WaitFor(milliseconds(100), &status);
    }
    if (finished) break;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (steady_clock::now() >= deadline)
    {
      PyErr_SetString(PyExc_TimeoutError,
                      fmt::format("collective '{}' did not complete within {} s", name_,
                                  timeout_seconds).c_str());
      throw py::error_already_set();
    }
  }
  ThrowIfError(status);
  if (gather_) {
    if (consumed_) return output_;
    // Hand the gathered bytes to numpy without copying: a capsule owns them.
    auto* holder = new std::shared_ptr<GatherOutput>(gather_);
    py::capsule owner(holder, [](void* p) { delete static_cast<std::shared_ptr<GatherOutput>*>(p); });
    std::vector<py::ssize_t> shape(gather_->shape.begin(), gather_->shape.end());
    output_ = py::array(dtype_, shape, gather_->data.data(), owner);
    consumed_ = true;
  }
  return output_;
}

}  // namespace tfmpi::bindings
