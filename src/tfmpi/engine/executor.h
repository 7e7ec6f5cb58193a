// Executor: the data half of one engine cycle. Plans fusion groups over the
// negotiated responses (planning::PlanFusion), runs one transport collective
// per group, copies results out and fires each request's callback.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tfmpi/engine/pending_table.h"
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
  // removed and completed exactly once. The first failure of a transport call
  // (or an exception while running a group) ends the cycle: no later group
  // calls the communicator, every request not yet completed fails with it, and
  // it is returned (the engine then stops). A completion callback that throws
  // does not stop the cycle (the ranks still agree); the first such error is
  // stored in *callback_error. Note [Engine errors] in engine_loop.cc.
  // `slots[i]`: where responses[i]'s request is pending (nullptr: not here).
  Status Execute(const std::vector<std::shared_ptr<const Response>>& responses,
                 const std::vector<NameSlot*>& slots, PendingTable* pending,
                 Clock::time_point decided_at, Status* callback_error);

  const ExecutorStats& stats() const { return stats_; }
  const planning::FusionOptions& fusion() const { return fusion_; }
  // What the last Execute planned its groups over, one item per response it ran.
  const std::vector<planning::FusionItem>& planned_items() const { return items_; }
  // From the next Execute on (every rank the same, Note [Autotune]).
  void SetFusion(const planning::FusionOptions& fusion) { fusion_ = fusion; }

 private:
  struct Item {
    const Response* response;
    Request request;
  };
  using Group = std::vector<Item*>;
  // A reduction as the transport runs it: an average is a sum scaled by 1/size.
  struct Reduction {
    DataType dtype;
    std::size_t elem;  // bytes per element
    bool average;
    ReduceOp op;  // never kAverage
    double scale;
  };
  Reduction ReductionOf(const TensorMeta& meta) const;
  Status RunGroup(Group& group);
  Status RunAllreduce(Group& group);
  Status RunBroadcast(Group& group);
  // executor_owners.cc: groups whose tensors have roots (owners) that differ.
  Status RunReduce(Group& group);
  Status RunOwnerBroadcast(Group& group);
  Status RunAllgather(Item& item);
  void Finish(Item& item, const Status& status);  // Complete(), keeping a callback's error
  char* FusionBuffer(std::size_t bytes);
  void Trace(const Item& item, const char* phase, Clock::time_point a, Clock::time_point b);
  // A fused group's phases: copy in [a, b), collective [b, c), copy out [c, d).
  void TraceFused(const Group& group, Clock::time_point a, Clock::time_point b,
                  Clock::time_point c, Clock::time_point d);

  Communicator* comm_;
  planning::FusionOptions fusion_;
  Timeline* timeline_;
  std::vector<char> fusion_buffer_;
  std::vector<char> owned_buffer_;  // this rank's segment of a fused reduce
  std::vector<planning::FusionItem> items_;  // this cycle's, reused
  ExecutorStats stats_;
  std::function<void(const ExecutorStats&)> publish_;
  Status callback_error_;  // this cycle's first callback exception
};

}  // namespace tfmpi
