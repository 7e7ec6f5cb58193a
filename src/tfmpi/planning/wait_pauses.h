// How long a rank sleeps between tests of a collective that waits for a late
// peer (transport/mpi/mpi_communicator.cc, Note [Waiting without spinning]).
// Pure: time is passed in, so the schedule is testable without clocks or MPI.
//
// Note [Pauses that follow the wait]
// Waiting costs a rank twice: each wakeup to test the request costs CPU (a
// context switch and a poll of MPI's sockets), and the time from the peer's
// arrival to this rank's next test is latency that the peer spends spinning
// in the data collective that follows (a blocking MPI call polls at full
// speed). Long pauses save the first and pay the second. Pauses that doubled
// up to 500 us did that: across two emulated hosts of one core, with a peer
// 0-4 ms late, rank 0's engine spent 1.37 ms of CPU per allreduce, most of it
// spinning in the data allreduce whenever it arrived second, and each
// iteration took ~1.5 ms of wall time beyond the lateness itself
// (docs/performance-history.md, "Waiting for a late peer"). So a pause doubles
// from kFirstPause up to at most the larger of kShortWaitPause and a sixteenth
// of the time already waited, and never above kMaxPause: a peer a
// few milliseconds late is seen within ~50-250 us, and a wait of seconds (a
// peer saving a checkpoint) wakes this rank at most 1,000 times a second, while
// the latency it adds stays a small fraction of the wait.
#pragma once

#include <chrono>

namespace tfmpi::planning {

struct WaitPauses {
  // Tests run back to back this long first: peers in step arrive within it.
  static constexpr std::chrono::microseconds kSpin{50};
  static constexpr std::chrono::microseconds kFirstPause{10};
  static constexpr std::chrono::microseconds kShortWaitPause{50};
  static constexpr int kWaitFraction = 16;
  static constexpr std::chrono::microseconds kMaxPause{1000};

  // The pause after `pause`, once the rank has waited `waited` in all.
  static std::chrono::microseconds Next(std::chrono::microseconds pause,
                                        std::chrono::microseconds waited);
};

}  // namespace tfmpi::planning
