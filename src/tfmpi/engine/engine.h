// Engine: the asynchronous request queue and its background thread.
//
// Any thread may Enqueue() requests, keyed by tensor name. One background
// thread per process runs cycles: negotiate which pending requests are ready
// on every rank (Negotiator), then run them, fused (Executor), firing each
// request's callback with its Status on the background thread.
//
// Lifecycle: Start() creates the communicator on the background thread (MPI
// is initialised and finalised there), Shutdown() is collective: the engine
// stops once every rank has asked to; requests still pending then complete
// with kAborted.
//
// Failures never end the process: an exception on the background thread or a
// transport failure becomes an error on every request, the engine refuses new
// ones with it, and after a transport failure it issues no further
// collective (Note [Engine errors], engine_loop.cc).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tfmpi/engine/autotune_session.h"
#include "tfmpi/engine/name_slots.h"
#include "tfmpi/engine/negotiator.h"
#include "tfmpi/engine/pending_table.h"
#include "tfmpi/engine/options.h"
#include "tfmpi/engine/request.h"
#include "tfmpi/transport/communicator.h"

namespace tfmpi {

class Timeline;

using CommunicatorFactory = std::function<Status(std::unique_ptr<Communicator>*)>;

struct EngineStats {
  std::uint64_t cycles = 0;
  std::uint64_t full_rounds = 0;
  std::uint64_t cache_hits = 0;
  double negotiation_seconds = 0;  // time inside negotiation, all cycles
  std::uint64_t busy_cycles = 0;   // cycles that ran at least one tensor
  double busy_negotiation_seconds = 0;
  std::uint64_t tensors = 0;
  std::uint64_t groups = 0;
  std::uint64_t fused_groups = 0;
  std::uint64_t bytes = 0;
  AutotuneState autotune;  // TFMPI_AUTOTUNE: the search and the settings in use
};

class Engine {
 public:
  // Starts the background thread and waits until the communicator is up.
  static Status Start(const EngineOptions& options, CommunicatorFactory factory,
                      std::unique_ptr<Engine>* out);
  ~Engine();  // Shutdown()

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues a request. On error nothing is queued and `done` is
  // not called. Otherwise `done` is called exactly once, on the background thread.
  Status Enqueue(Request request);
  // Queues several requests at once (a grouped op's tensors), so that the
  // next cycle sees all of them. statuses[i] is what Enqueue(requests[i])
  // would have returned.
  std::vector<Status> EnqueueAll(std::vector<Request> requests);

  // Collective: returns once every rank has called it (or the engine failed).
  void Shutdown();

  // Why this rank is about to leave: the error its program stops on, e.g.
  // "ValueError: bad batch". Shutdown() then passes it to the other ranks,
  // whose collectives still waiting for this rank fail with "rank 1 stopped
  // with an error: ValueError: bad batch" (Note [Ranks that stop early]).
  void SetExitReason(std::string reason);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  const std::string& transport_name() const { return transport_name_; }
  EngineStats Stats() const;

 private:
  explicit Engine(const EngineOptions& options) : options_(options) {}
  Status Validate(const Request& request) const;
  Status AdmitLocked(Request request, Clock::time_point now);  // mu_ held
  bool TakeWaiterLocked();                                     // mu_ held
  static void FailAll(const Status& status, std::vector<Request>* requests);

  // The background thread (engine_loop.cc).
  void Run(CommunicatorFactory factory);
  // Cycles until every rank has shut down (OK) or this rank must stop issuing
  // collectives (the failure, Note [Engine errors]).
  Status Serve(Communicator* comm, Timeline* timeline, PendingTable* pending,
               std::vector<Request>* arrived);
  Status LeaveAfterError(const Status& error, PendingTable* pending);
  void FailPendingAfterPeerLeft(PendingTable* pending, const std::map<int, std::string>& leavers);

  const EngineOptions options_;
  std::thread thread_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string transport_name_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  Status start_status_;
  bool shutdown_requested_ = false;
  bool waiting_ = false;  // the loop waits for its next cycle: Enqueue wakes it
  Status stop_status_;      // not OK: the engine stopped or failed; Enqueue refuses with it
  std::string exit_reason_;  // SetExitReason
  std::vector<Request> incoming_;
  NameSlots names_;  // the names in flight, each with its slot (Note [Pending slots])
  EngineStats stats_;
};

}  // namespace tfmpi
