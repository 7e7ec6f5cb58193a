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
  explicit Coordinator(int size) : size_(size), heard_from_(static_cast<std::size_t>(size)) {}

  // Records rank `rank`'s reports. A second report of a name from the same
  // rank before it is decided is a protocol error (the engine refuses
  // duplicate in-flight names before they get here).
  void Ingest(int rank, const std::vector<TensorMeta>& metas, Clock::time_point now);

  // Decisions for every tensor now reported by all ranks, removed from the table.
  std::vector<Response> TakeDecided();

  // Forgets what rank `rank` reported so far: it stopped with an error, and
  // those requests will never run there (Note [Ranks that stop early]). Call
  // before ingesting the round's reports.
  void Withdraw(int rank);

  // Tensors waiting longer than `after` that were not yet reported as
  // stalled: "tensor 'x' (allreduce ...) submitted by ranks 0, 2 is waiting for rank 1".
  // Each missing rank is named for what the coordinator knows of it: one that
  // has reported nothing since the engine started may still be starting (a
  // host with little CPU can take minutes to import TensorFlow); one waiting
  // on other tensors likely took another branch (a mismatch to look for);
  // one with nothing pending is busy outside collectives (a slow host, a long
  // first trace), or its program skipped this collective.
  std::vector<std::string> NewStalls(Clock::time_point now, Clock::duration after);

  // Note [Deadlock]
  // If every rank has reported tensors that are not complete, and that has
  // lasted `after` with no tensor completing, every rank is waiting for
  // collectives the others will never submit (their sequences diverged, e.g.
  // different step counts). Then every waiting tensor is failed on the ranks
  // that submitted it, with a message naming the missing ranks. Call once per
  // full round, after TakeDecided.
  // Why `after` (TFMPI_STALL_TIMEOUT_SECONDS) can be as short as 10 s: the
  // rule needs *every* rank to hold a reported, incomplete tensor and *no*
  // tensor to complete anywhere meanwhile. A slow rank (computing, loading
  // data, rank 0 writing a checkpoint while the others wait in a broadcast)
  // has nothing outstanding, so however long it takes, the rule does not
  // fire. Ranks that submit the same tensors in different orders complete
  // them as soon as each has submitted all of them (Enqueue never blocks).
  // The one false alarm: every rank has an asynchronous collective
  // outstanding that the others have not submitted yet, and every rank then
  // computes for longer than `after` before submitting the others' ones. In
  // tfmpi's training path that does not arise (a step's gradients go in one
  // grouped op, and other collectives are waited for where they are made);
  // a program that does it needs a larger TFMPI_STALL_TIMEOUT_SECONDS, or 0.
  // A waiting request that the response cache serves is reported here only
  // after `after` / 2 (Engine: promote_after), so a divergence is reported
  // within 1.5 x `after`.
  std::vector<Response> TakeDeadlocked(Clock::time_point now, Clock::duration after);

  std::size_t pending() const { return table_.size(); }

 private:
  // Ranks that reported a tensor not yet reported by every rank.
  std::vector<bool> WaitingRanks() const;

  struct Entry {
    std::vector<std::optional<TensorMeta>> per_rank;
    int reported = 0;
    Clock::time_point first_report;
    bool stall_reported = false;
  };
  int size_;
  std::vector<bool> heard_from_;  // ranks that reported any tensor so far
  std::map<std::string, Entry> table_;
  std::vector<std::string> complete_;  // names reported by all, in completion order
  bool all_blocked_ = false;
  Clock::time_point all_blocked_since_;
};

}  // namespace tfmpi
