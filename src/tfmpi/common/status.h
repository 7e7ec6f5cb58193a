// Status: the engine's error model.
//
// Note [Error model]
// Every fallible call of the core returns a Status (or fires a callback with
// one); nothing throws across the engine's API, and a Status crosses from the
// background thread to the caller's thread by value. A request that cannot
// run (bad input, ranks that disagree about a tensor) completes with its own
// Status and the engine carries on; a transport failure stops the engine, and
// every pending and later request completes with the first failure (Note
// [Engine errors], engine/engine_loop.cc). At the edges a Status becomes the
// caller's error: a tfmpi.errors exception of the matching class in the numpy
// API (bindings/python), a TensorFlow status in an op's kernel
// (bindings/tensorflow/tf_status.h), an exit code in the launcher.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace tfmpi {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // caller passed something unusable (bad dtype, bad op)
  kFailedPrecondition, // engine not initialised, already shut down, ...
  kMismatch,           // ranks disagree about a tensor (shape, dtype, op, root)
  kAborted,            // engine shut down while the request was pending
  kInternal,           // transport failure or a bug
  kNotFound,           // a file, dataset or column that is not there
  kDataLoss,           // a file that is truncated or corrupt
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status FailedPrecondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }
  static Status Mismatch(std::string m) { return {StatusCode::kMismatch, std::move(m)}; }
  static Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Mismatch: tensor 'w' ..." ; "OK" for success.
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Inside a catch block: the exception being handled as an Internal status,
// "<where>: <what()>" (Note [Engine errors] in engine/engine_loop.cc).
Status StatusFromCurrentException(std::string_view where);

}  // namespace tfmpi

// Propagates a non-OK Status to the caller.
#define TFMPI_RETURN_IF_ERROR(expr)            \
  do {                                         \
    ::tfmpi::Status _tfmpi_status = (expr);    \
    if (!_tfmpi_status.ok()) return _tfmpi_status; \
  } while (0)
