// Coordinator: rank 0's table of tensors reported by some ranks but not yet
// decided. A tensor is decided (planning::DecideResponse) once every rank has
// reported it; decisions come out in the order their last report arrived.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tfmpi/engine/request.h"

namespace tfmpi {

class Coordinator {
 public:
  explicit Coordinator(int size) : size_(size) {}

  // Records rank `rank`'s reports. A second report of a name from the same
  // rank before it is decided is a protocol error (the engine refuses
  // duplicate in-flight names before they get here).
  void Ingest(int rank, const std::vector<TensorMeta>& metas, Clock::time_point now);

  // Decisions for every tensor now reported by all ranks, removed from the table.
  std::vector<Response> TakeDecided();

  // Tensors waiting longer than `after` that were not yet reported as
  // stalled: "tensor 'x' (allreduce ...) submitted by ranks 0, 2 is waiting for rank 1".
  std::vector<std::string> NewStalls(Clock::time_point now, Clock::duration after);

  // Note [Deadlock]
  // If every rank has reported tensors that are not complete, and that has
  // lasted `after` with no tensor completing, every rank is waiting for
  // collectives the others will never submit (their sequences diverged, e.g.
  // different step counts). Then every waiting tensor is failed on the ranks
  // that submitted it, with a message naming the missing ranks. Call once per
  // full round, after TakeDecided.
  std::vector<Response> TakeDeadlocked(Clock::time_point now, Clock::duration after);

  std::size_t pending() const { return table_.size(); }

 private:
  struct Entry {
    std::vector<std::optional<TensorMeta>> per_rank;
    int reported = 0;
    Clock::time_point first_report;
    bool stall_reported = false;
  };
  int size_;
  std::map<std::string, Entry> table_;
  std::vector<std::string> complete_;  // names reported by all, in completion order
  bool all_blocked_ = false;
  Clock::time_point all_blocked_since_;
};

}  // namespace tfmpi
