// Negotiator: the negotiation half of one engine cycle. Decides, identically
// on every rank, which pending requests run now.
//
// Note [Negotiation protocol]
// Each cycle every rank contributes a word vector to one bitwise-AND
// allreduce: bit 0 "I need no full round", bit 1 "I want to shut down", bit 2
// "I do not want to shut down" (cleared anywhere: some rank is leaving), bit 3
// "I have nothing pending" (set everywhere: the engines may slow their cycles,
// Note [Idle cycles] in engine_loop.cc), and one bit per response-cache entry that
// one of my pending requests matches.
// After the AND, set cache bits are ready everywhere (steady state: this is
// the whole negotiation). If any rank cleared bit 0 (it has a request the
// cache does not serve, or one already reported to the coordinator), a full
// round follows: every rank sends the metas of all its not-yet-reported
// pending requests to rank 0 (cached ones too, so a rank whose request
// matches the cache and a rank whose request does not still meet at the
// coordinator), rank 0 decides every tensor now reported by all ranks, and
// broadcasts the decisions. Cache hits come first, in bit order, then the
// coordinator's decisions in its order: the same list on every rank.
// A cached request that waits longer than `promote_after` is reported to the
// coordinator, so a stall can name the ranks that never submitted it.
// A rank that starts shutting down clears bit 0 once, so that a full round
// carries its leave notice (with the error it stops on, if it gave one) to
// every rank: those still waiting for collectives can then say which rank
// left and why (Note [Ranks that stop early], engine_loop.cc). Steady state
// is untouched: one full round per leaving rank, none otherwise.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tfmpi/engine/coordinator.h"
#include "tfmpi/engine/pending_table.h"
#include "tfmpi/engine/response_cache.h"
#include "tfmpi/transport/communicator.h"

namespace tfmpi {

struct NegotiationOptions {
  std::size_t cache_capacity = 1024;
  Clock::duration promote_after = std::chrono::seconds(30);
  Clock::duration stall_warning = std::chrono::seconds(60);  // zero: never warn
  Clock::duration deadlock_timeout = Clock::duration::max();  // Note [Deadlock]
};

struct NegotiationResult {
  std::vector<std::shared_ptr<const Response>> responses;  // to execute now, in this order
  // The slot of each response's pending request on this rank (nullptr: not
  // pending here, e.g. a deadlock error for a tensor this rank never sent).
  std::vector<NameSlot*> slots;
  bool shutdown = false;            // every rank asked to shut down
  bool peer_leaving = false;        // some rank asked to shut down (maybe not all)
  bool full_round = false;
  bool all_idle = false;            // no rank had anything pending
  std::size_t cache_hits = 0;
  // When the AND returned: every rank leaves it at about the same moment, so
  // it is the shared phase the next cycle is timed from (Note [Cycle phase]).
  Clock::time_point synced_at{};
};

class Negotiator {
 public:
  Negotiator(Communicator* comm, const NegotiationOptions& options);

  // One cycle. `want_shutdown`: this rank is leaving; `exit_reason` (may be
  // empty) is the error it stops on, passed to the other ranks once.
  Status Negotiate(PendingTable* pending, bool want_shutdown, const std::string& exit_reason,
                   NegotiationResult* out);

  // Ranks that said they are leaving, with their exit reasons ("" if none).
  const std::map<int, std::string>& leavers() const { return leavers_; }

 private:
  void ForgetBits();
  Status FullRound(PendingTable* pending, bool want_shutdown, const std::string& exit_reason,
                   std::vector<Response>* decided);

  Communicator* comm_;
  NegotiationOptions options_;
  ResponseCache cache_;
  std::unique_ptr<Coordinator> coordinator_;  // rank 0 only
  std::vector<std::uint64_t> words_;
  std::vector<NameSlot*> slot_of_bit_;  // this cycle's request for each bit it set
  std::vector<std::size_t> bits_set_;    // the bits set this cycle
  bool leave_announced_ = false;
  std::map<int, std::string> leavers_;
};

}  // namespace tfmpi
