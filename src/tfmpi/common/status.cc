#include "tfmpi/common/status.h"

#include <exception>
#include <new>

namespace tfmpi {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kMismatch: return "Mismatch";
    case StatusCode::kAborted: return "Aborted";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kDataLoss: return "DataLoss";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

Status StatusFromCurrentException(std::string_view where) {
  std::string what;
  try {
    throw;
  } catch (const std::bad_alloc&) {
    what = "out of memory (std::bad_alloc)";
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  return Status::Internal(std::string(where) + ": " + what);
}

}  // namespace tfmpi
