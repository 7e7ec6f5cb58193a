// CountLocalCores reads this machine: only its bounds can be checked.
#include "tfmpi/launcher/local_cores.h"

#include <gtest/gtest.h>

#include <thread>

namespace tfmpi::launcher {
namespace {

TEST(LocalCores, BetweenOneAndTheHardwareThreads) {
  const int cores = CountLocalCores();
  EXPECT_GE(cores, 1);
  if (std::thread::hardware_concurrency() > 0) {
    EXPECT_LE(cores, static_cast<int>(std::thread::hardware_concurrency()));
  }
}

}  // namespace
}  // namespace tfmpi::launcher
