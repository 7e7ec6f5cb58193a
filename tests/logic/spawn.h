// Threads as ranks, after gloo's test/base_test.h spawn(): Spawn(size, fn)
// runs fn(rank) on `size` threads at once and joins them all.
//
// GoogleTest assertions are thread-safe, so fn may use EXPECT_*/ASSERT_*
// (an ASSERT only leaves that rank's fn). An exception escaping fn is turned
// into a test failure naming the rank instead of terminating the process.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace tfmpi::testing {

inline void Spawn(int size, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(size));
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&fn, rank] {
      try {
        fn(rank);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << rank << " threw: " << e.what();
      } catch (...) {
        ADD_FAILURE() << "rank " << rank << " threw a non-standard exception";
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace tfmpi::testing
