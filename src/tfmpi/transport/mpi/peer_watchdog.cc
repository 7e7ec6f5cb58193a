#include "tfmpi/transport/mpi/peer_watchdog.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#ifdef __linux__
#include <pthread.h>
#endif

#include "tfmpi/common/logging.h"
#include "tfmpi/planning/liveness.h"
#include "tfmpi/transport/mpi/mpi_communicator.h"

namespace tfmpi {
namespace {

constexpr int kHeartbeatTag = 1;

std::string ThisHost() {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  return std::string(name, static_cast<std::size_t>(len));
}

// Note [Ending this host's part of the job]
// A host whose link is down keeps its MPI daemon (Open MPI's orted, MPICH's
// hydra_pmi_proxy): the daemon waits for mpirun, and the output it forwarded
// after the loss sits unacknowledged on its connection, so TCP keeps retrying
// for about 15 minutes (a keepalive never fires while data is unacknowledged).
// Nobody else can reach it. So a rank that lost a peer ends its daemon when it
// exits (SIGTERM: the daemon ends its other ranks and itself at once, link or
// no link). Where the link is up, mpirun sees the daemon go and ends the job
// the same way it would for the rank's own exit.
void EndLocalDaemon() {
  const pid_t parent = ::getppid();
  std::ifstream comm("/proc/" + std::to_string(parent) + "/comm");
  std::string name;
  std::getline(comm, name);
  if (name == "orted" || name == "hydra_pmi_proxy") ::kill(parent, SIGTERM);
}

// Ends the process `grace` from now, from a thread of its own, whatever the
// others are blocked in (MPI_Abort itself can wait for an unreachable host).
void ExitAfter(double grace_seconds) {
  std::thread([grace_seconds] {
    std::this_thread::sleep_for(std::chrono::duration<double>(grace_seconds));
    std::fflush(nullptr);
    EndLocalDaemon();
    ::_exit(kExitPeerLost);
  }).detach();
}

}  // namespace

Status PeerWatchdog::Start(MPI_Comm parent, const PeerWatchdogOptions& options,
                           std::unique_ptr<PeerWatchdog>* out) {
  std::unique_ptr<PeerWatchdog> w(new PeerWatchdog());
  w->options_ = options;
  TFMPI_RETURN_IF_ERROR(
      DuplicateComm(parent, "MPI_Comm_dup(heartbeat)", &w->comm_, &w->rank_, &w->size_));
  std::vector<char> mine(MPI_MAX_PROCESSOR_NAME, '\0');
  const std::string host = ThisHost();
  host.copy(mine.data(), mine.size() - 1);
  std::vector<char> all(mine.size() * static_cast<std::size_t>(w->size_));
  TFMPI_RETURN_IF_ERROR(MpiStatus(MPI_Allgather(mine.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                                                all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                                                w->comm_.get()),
                                  "MPI_Allgather(host names)"));
  for (int r = 0; r < w->size_; ++r) w->hosts_.emplace_back(all.data() + r * MPI_MAX_PROCESSOR_NAME);
  PeerWatchdog* p = w.get();
  if (options.timeout_seconds > 0 && w->size_ > 1) w->thread_ = std::thread([p] { p->Run(); });
  *out = std::move(w);
  return Status::Ok();
}

PeerWatchdog::~PeerWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (abandoned_ || lost_) comm_.release();  // Note [Abandoning MPI]
}

Status PeerWatchdog::health() const {
  if (!lost_.load(std::memory_order_acquire)) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  return health_;
}

void PeerWatchdog::ReportLost(int peer, double silent_seconds, const std::string& why) {
  const std::string message = fmt::format(
      "lost contact with rank {} on host {} ({}): it was killed, frozen or cut off from the "
      "network. Rank {} on host {} stops (TFMPI_PEER_TIMEOUT_SECONDS={:g}).",
      peer, hosts_[static_cast<std::size_t>(peer)],
      why.empty() ? fmt::format("no reply for {:.0f} s", silent_seconds) : why, rank_,
      hosts_[static_cast<std::size_t>(rank_)], options_.timeout_seconds);
  std::fprintf(stderr, "tfmpi: %s\n", message.c_str());
  std::fflush(stderr);
  {
    std::lock_guard<std::mutex> lock(mu_);
    health_ = Status::Aborted(message);
  }
  lost_.store(true, std::memory_order_release);
  std::atexit(EndLocalDaemon);  // Note [Ending this host's part of the job]
  ExitAfter(options_.exit_grace_seconds);
}

// The heartbeat loop: one receive from any source stays posted, at most one
// send per neighbour is in flight (a neighbour that stopped receiving never
// makes requests pile up), and every interval the tracker decides.
void PeerWatchdog::Run() {
#ifdef __linux__
  pthread_setname_np(pthread_self(), "tfmpi-watchdog");
#endif
  using Clock = planning::LivenessTracker::Clock;
  const std::vector<int> peers = planning::HeartbeatPeers(rank_, size_);
  planning::LivenessTracker tracker(peers, options_.timeout_seconds, Clock::now());
  const auto interval = planning::LivenessTracker::Interval(options_.timeout_seconds);
  char in_byte = 0;
  const char out_byte = 1;
  MPI_Request recv = MPI_REQUEST_NULL;
  std::vector<MPI_Request> sends(peers.size(), MPI_REQUEST_NULL);
  std::string failure;
  int rc = MPI_Irecv(&in_byte, 1, MPI_BYTE, MPI_ANY_SOURCE, kHeartbeatTag, comm_.get(), &recv);
  if (rc != MPI_SUCCESS) failure = MpiStatus(rc, "MPI_Irecv(heartbeat)").message();
  while (failure.empty()) {
    const Clock::time_point now = Clock::now();
    while (true) {
      int done = 0;
      MPI_Status status;
      rc = MPI_Test(&recv, &done, &status);
      if (rc != MPI_SUCCESS) failure = MpiStatus(rc, "MPI_Test(heartbeat)").message();
      if (rc != MPI_SUCCESS || !done) break;
      tracker.Heard(status.MPI_SOURCE, now);
      rc = MPI_Irecv(&in_byte, 1, MPI_BYTE, MPI_ANY_SOURCE, kHeartbeatTag, comm_.get(), &recv);
      if (rc != MPI_SUCCESS) failure = MpiStatus(rc, "MPI_Irecv(heartbeat)").message();
    }
    for (std::size_t i = 0; i < peers.size() && failure.empty(); ++i) {
      int done = 1;
      if (sends[i] != MPI_REQUEST_NULL) MPI_Test(&sends[i], &done, MPI_STATUS_IGNORE);
      if (!done) continue;
      rc = MPI_Isend(&out_byte, 1, MPI_BYTE, peers[i], kHeartbeatTag, comm_.get(), &sends[i]);
      if (rc != MPI_SUCCESS) {
        ReportLost(peers[i], 0, MpiStatus(rc, "sending a heartbeat").message());
        return;
      }
    }
    if (!failure.empty()) break;
    const planning::LivenessVerdict v = tracker.Check(now);
    if (v.event == planning::LivenessEvent::kSilent) {
      std::fprintf(stderr,
                   "tfmpi: warning: no reply from rank %d on host %s for %.0f s (rank %d on host "
                   "%s waits; it is lost after TFMPI_PEER_TIMEOUT_SECONDS=%g)\n",
                   v.peer, hosts_[static_cast<std::size_t>(v.peer)].c_str(), v.silent_seconds,
                   rank_, hosts_[static_cast<std::size_t>(rank_)].c_str(),
                   options_.timeout_seconds);
      std::fflush(stderr);
    } else if (v.event == planning::LivenessEvent::kLost) {
      ReportLost(v.peer, v.silent_seconds, "");
      return;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, interval, [this] { return stop_; })) break;
  }
  if (!failure.empty()) {
    ReportLost(peers.front(), 0, failure);
    return;
  }
  if (abandoned_) return;
  // A clean stop: every rank stops in the same engine cycle. The posted
  // receive is cancelled; sends in flight complete on their own.
  MPI_Cancel(&recv);
  MPI_Wait(&recv, MPI_STATUS_IGNORE);
  for (MPI_Request& s : sends)
    if (s != MPI_REQUEST_NULL) MPI_Request_free(&s);
}

}  // namespace tfmpi
