// Status -> Python exception. The binding throws StatusError; the translator
// registered in module.cc raises the matching tfmpi.errors class.
#pragma once

#include <stdexcept>

#include "tfmpi/common/status.h"

namespace tfmpi::bindings {

class StatusError : public std::runtime_error {
 public:
  explicit StatusError(const Status& s) : std::runtime_error(s.message()), code_(s.code()) {}
  StatusCode code() const { return code_; }

 private:
  StatusCode code_;
};

inline void ThrowIfError(const Status& s) {
  if (!s.ok()) throw StatusError(s);
}

void RegisterStatusTranslator();

}  // namespace tfmpi::bindings
