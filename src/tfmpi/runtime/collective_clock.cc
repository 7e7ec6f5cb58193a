#include "tfmpi/runtime/collective_clock.h"

#include <chrono>
#include <mutex>

namespace tfmpi {
namespace {

using Clock = std::chrono::steady_clock;

struct State {
  std::mutex mu;
  int running = 0;
  Clock::time_point since;
  Clock::duration total{0};
};

State& Get() {
  static State state;
  return state;
}

}  // namespace

void CollectiveStarted() {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.running++ == 0) s.since = Clock::now();
}

void CollectiveFinished() {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.running > 0 && --s.running == 0) s.total += Clock::now() - s.since;
}

double CollectiveSeconds() {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  Clock::duration total = s.total;
  if (s.running > 0) total += Clock::now() - s.since;
  return std::chrono::duration<double>(total).count();
}

}  // namespace tfmpi
