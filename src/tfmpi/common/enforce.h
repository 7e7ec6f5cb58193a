// Value-capturing checks for programmer errors (broken internal invariants).
// They throw tfmpi::EnforceError with both operands printed; user-facing input
// errors are reported through Status instead.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace tfmpi {

class EnforceError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace tfmpi

#define TFMPI_ENFORCE(cond, ...)                                                   \
  do {                                                                             \
    if (!(cond))                                                                   \
      throw ::tfmpi::EnforceError(fmt::format("{}:{}: check failed: {}. {}",      \
                                              __FILE__, __LINE__, #cond,           \
                                              fmt::format(__VA_ARGS__)));          \
  } while (0)

#define TFMPI_ENFORCE_OP_(a, b, op)                                                \
  do {                                                                             \
    const auto& _va = (a);                                                         \
    const auto& _vb = (b);                                                         \
    if (!(_va op _vb))                                                             \
      throw ::tfmpi::EnforceError(fmt::format("{}:{}: check failed: {} " #op       \
                                              " {} ({} vs {})",                    \
                                              __FILE__, __LINE__, #a, #b, _va, _vb)); \
  } while (0)

#define TFMPI_ENFORCE_EQ(a, b) TFMPI_ENFORCE_OP_(a, b, ==)
#define TFMPI_ENFORCE_LE(a, b) TFMPI_ENFORCE_OP_(a, b, <=)
#define TFMPI_ENFORCE_LT(a, b) TFMPI_ENFORCE_OP_(a, b, <)
