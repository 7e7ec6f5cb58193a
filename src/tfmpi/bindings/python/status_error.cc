#include "tfmpi/bindings/python/status_error.h"

#include <pybind11/pybind11.h>

namespace tfmpi::bindings {

namespace py = pybind11;

void RegisterStatusTranslator() {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      const char* cls = "TfmpiError";
      switch (e.code()) {
        case StatusCode::kInvalidArgument: cls = "InvalidArgumentError"; break;
        case StatusCode::kFailedPrecondition: cls = "NotInitializedError"; break;
        case StatusCode::kMismatch: cls = "TensorMismatchError"; break;
        case StatusCode::kAborted: cls = "AbortedError"; break;
        default: break;
      }
      py::object type = py::module_::import("tfmpi.errors").attr(cls);
      PyErr_SetString(type.ptr(), e.what());
    }
  });
}

}  // namespace tfmpi::bindings
