#include "tfmpi/planning/wait_pauses.h"

#include <algorithm>

namespace tfmpi::planning {

std::chrono::microseconds WaitPauses::Next(std::chrono::microseconds pause,
                                           std::chrono::microseconds waited) {
  // Note [Pauses that follow the wait]
  const auto cap = std::min(kMaxPause, std::max(kShortWaitPause, waited / kWaitFraction));
  return std::clamp(pause * 2, kFirstPause, cap);
}

}  // namespace tfmpi::planning
