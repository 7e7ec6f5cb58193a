// Pure liveness decisions for the peer watchdog (transport/mpi/peer_watchdog):
// which ranks a rank exchanges heartbeats with, and what a silence means.
//
// Note [Lost peers]
// MPI cannot be interrupted inside a blocking call, and a peer that was
// killed, frozen (SIGSTOP) or cut off from the network leaves every other
// rank blocked in a collective forever (the negotiation's stall rules never
// run: no cycle completes). So each rank exchanges small heartbeats with its
// two ring neighbours (rank - 1 and rank + 1, modulo the size) on a
// communicator of their own, from a thread of their own: a rank busy
// computing, or blocked in a collective, still answers. Every rank, and so
// every host boundary, is watched by two ranks, and no rank opens more than
// two extra connections whatever the size.
// A neighbour silent for half the peer timeout is reported ("no reply from
// rank R on host H for N s"); silent for the whole timeout, it is lost: the
// watching rank names it, fails its requests and leaves (the engine stops
// after a transport failure, Note [Engine errors]), and the process exits
// after a short grace even if the engine thread is stuck inside MPI.
// Its exit makes mpirun end the job on every host it can still reach, and it
// ends its own host's MPI daemon (Note [Ending this host's part of the job],
// transport/mpi/peer_watchdog.cc), which nobody can reach on a host cut off.
// mpirun itself must give up a host whose link is down, or it waits for its
// daemon's answer for about 15 minutes: tfmpirun has Open MPI probe its daemons'
// connections (TCP keepalive) and give one up between 0.6 and 0.6 timeout + 1 s
// after the loss, after the ranks' report and before their exit (Note [Losing
// a host], launcher/mpirun_command.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace tfmpi::planning {

// The ranks `rank` sends heartbeats to and expects them from (its ring
// neighbours; one rank when size is 2, none when size is 1).
std::vector<int> HeartbeatPeers(int rank, int size);

enum class LivenessEvent { kNone, kSilent, kLost };

struct LivenessVerdict {
  LivenessEvent event = LivenessEvent::kNone;
  int peer = -1;
  double silent_seconds = 0;
};

// Tracks when each watched peer was last heard from. Time is passed in, so
// the rules are testable without clocks or MPI.
class LivenessTracker {
 public:
  using Clock = std::chrono::steady_clock;
  LivenessTracker(std::vector<int> peers, double timeout_seconds, Clock::time_point start);

  void Heard(int peer, Clock::time_point now);
  // The most severe news since the last call: each peer is reported silent
  // once (until heard again) and lost once.
  LivenessVerdict Check(Clock::time_point now);
  // How long to sleep between heartbeats: a tenth of the timeout, at most 1 s.
  static std::chrono::milliseconds Interval(double timeout_seconds);

 private:
  struct Peer {
    int rank;
    Clock::time_point last;
    bool reported_silent = false;
    bool reported_lost = false;
  };
  std::vector<Peer> peers_;
  double timeout_;
};

}  // namespace tfmpi::planning
