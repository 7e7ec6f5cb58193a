// PeerWatchdog: heartbeats with the ring neighbours on a private duplicate of
// the engine's communicator, from a thread of its own, so that a rank blocked
// inside MPI still learns that a peer was killed, frozen or cut off, and
// names it (Note [Lost peers], planning/liveness.h).
//
// Contract: Start() is collective over `parent` (it duplicates it and gathers
// every rank's host name) and needs MPI_THREAD_MULTIPLE. Once a neighbour is
// lost, health() returns the error naming it, the message is printed on
// stderr, and the process ends with kExitPeerLost `exit_grace` later unless it
// has exited by then. The destructor stops the thread; after Abandon() it
// makes no MPI call that could wait for other ranks.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tfmpi/common/status.h"
#include "tfmpi/transport/mpi/mpi_handles.h"

namespace tfmpi {

// Exit status of a process that lost a peer and did not exit by itself.
inline constexpr int kExitPeerLost = 75;

struct PeerWatchdogOptions {
  double timeout_seconds = 45;    // TFMPI_PEER_TIMEOUT_SECONDS; 0: no watchdog
  double exit_grace_seconds = 5;  // after a loss, before the process is ended
};

class PeerWatchdog {
 public:
  static Status Start(MPI_Comm parent, const PeerWatchdogOptions& options,
                      std::unique_ptr<PeerWatchdog>* out);
  ~PeerWatchdog();
  PeerWatchdog(const PeerWatchdog&) = delete;
  PeerWatchdog& operator=(const PeerWatchdog&) = delete;

  // OK, or the error naming the lost peer.
  Status health() const;
  const std::string& host_of(int rank) const { return hosts_[static_cast<std::size_t>(rank)]; }
  void Abandon() { abandoned_ = true; }

 private:
  PeerWatchdog() = default;
  void Run();
  void ReportLost(int peer, double silent_seconds, const std::string& why);

  PeerWatchdogOptions options_;
  mpi::Comm comm_;
  int rank_ = 0, size_ = 1;
  std::vector<std::string> hosts_;
  std::thread thread_;
  std::atomic<bool> lost_{false};
  std::atomic<bool> abandoned_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  Status health_;
};

}  // namespace tfmpi
