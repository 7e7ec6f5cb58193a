#include "tfmpi/planning/liveness.h"

#include <algorithm>

namespace tfmpi::planning {

std::vector<int> HeartbeatPeers(int rank, int size) {
  std::vector<int> peers;
  if (size < 2) return peers;
  peers.push_back((rank + size - 1) % size);
  const int next = (rank + 1) % size;
  if (next != peers.front()) peers.push_back(next);
  return peers;
}

LivenessTracker::LivenessTracker(std::vector<int> peers, double timeout_seconds,
                                 Clock::time_point start)
    : timeout_(timeout_seconds) {
  for (int p : peers) peers_.push_back({p, start});
}

void LivenessTracker::Heard(int peer, Clock::time_point now) {
  for (Peer& p : peers_) {
    if (p.rank != peer) continue;
    p.last = std::max(p.last, now);
    p.reported_silent = false;
  }
}

LivenessVerdict LivenessTracker::Check(Clock::time_point now) {
  LivenessVerdict verdict;
  if (timeout_ <= 0) return verdict;
  Peer* chosen = nullptr;
  for (Peer& p : peers_) {
    const double silent = std::chrono::duration<double>(now - p.last).count();
    LivenessEvent e = LivenessEvent::kNone;
    if (silent >= timeout_ && !p.reported_lost) e = LivenessEvent::kLost;
    else if (silent >= timeout_ / 2 && !p.reported_silent) e = LivenessEvent::kSilent;
    if (static_cast<int>(e) > static_cast<int>(verdict.event)) {
      verdict = {e, p.rank, silent};
      chosen = &p;
    }
  }
  if (chosen != nullptr) {
    chosen->reported_silent = true;
    if (verdict.event == LivenessEvent::kLost) chosen->reported_lost = true;
  }
  return verdict;
}

std::chrono::milliseconds LivenessTracker::Interval(double timeout_seconds) {
  const double ms = std::clamp(timeout_seconds * 100.0, 10.0, 1000.0);
  return std::chrono::milliseconds(static_cast<long>(ms));
}

}  // namespace tfmpi::planning
