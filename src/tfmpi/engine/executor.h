// Executor: the data half of one engine cycle. Plans fusion groups over the
// negotiated responses (planning::PlanFusion), runs one transport collective
// per group, copies results out and fires each request's callback.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tfmpi/engine/negotiator.h"
#include "tfmpi/engine/timeline.h"
#include "tfmpi/planning/fusion.h"
#include "tfmpi/transport/communicator.h"

namespace tfmpi {

struct ExecutorStats {
  std::uint64_t tensors = 0;
  std::uint64_t groups = 0;        // collectives run
  std::uint64_t fused_groups = 0;  // groups of more than one tensor
  std::uint64_t bytes = 0;
};

class Executor {
 public:
  // `publish` (optional) receives the updated stats before each group's
  // callbacks fire, so a caller woken by a callback sees counts that include it.
  Executor(Communicator* comm, const planning::FusionOptions& fusion, Timeline* timeline,
           std::function<void(const ExecutorStats&)> publish = nullptr);

  // Runs `responses` in order. Each names a request in `pending`, which is
  // removed and completed. A transport failure completes the affected
  // requests with it and is returned (the engine then stops).
  Status Execute(const std::vector<std::shared_ptr<const Response>>& responses,
                 PendingTable* pending,
                 Clock::time_point decided_at);

  const ExecutorStats& stats() const { return stats_; }

 private:
  struct Item {
    const Response* response;
    Request request;
  };
  Status RunGroup(std::vector<Item>& group);
  Status RunAllreduce(std::vector<Item>& group);
  Status RunBroadcast(std::vector<Item>& group);
  Status RunAllgather(Item& item);
  char* FusionBuffer(std::size_t bytes);
  void Trace(const Item& item, const char* phase, Clock::time_point a, Clock::time_point b);

  Communicator* comm_;
  planning::FusionOptions fusion_;
  Timeline* timeline_;
  std::vector<char> fusion_buffer_;
  ExecutorStats stats_;
  std::function<void(const ExecutorStats&)> publish_;
};

}  // namespace tfmpi
