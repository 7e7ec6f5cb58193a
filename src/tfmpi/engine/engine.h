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
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "tfmpi/engine/negotiator.h"
#include "tfmpi/engine/options.h"
#include "tfmpi/engine/request.h"
#include "tfmpi/transport/communicator.h"

namespace tfmpi {

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

  // Collective: returns once every rank has called it (or the engine failed).
  void Shutdown();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  const std::string& transport_name() const { return transport_name_; }
  EngineStats Stats() const;

 private:
  explicit Engine(const EngineOptions& options) : options_(options) {}
  void Run(CommunicatorFactory factory);
  Status Validate(const Request& request) const;
  void FailAll(const Status& status, std::vector<Request>* requests);
  void FailPendingAfterPeerLeft(PendingTable* pending);

  const EngineOptions options_;
  std::thread thread_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string transport_name_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  Status start_status_;
  bool shutdown_requested_ = false;
  bool idle_wait_ = false;  // the loop sleeps a long idle cycle: Enqueue wakes it
  bool stopped_ = false;   // background thread left its loop
  Status stop_status_;     // why requests are refused after stopping
  std::vector<Request> incoming_;
  std::unordered_set<std::string> in_flight_;
  EngineStats stats_;
};

}  // namespace tfmpi
