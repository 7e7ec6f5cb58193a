// Communicator: the transport interface the engine runs on.
//
// Contract: every rank calls the same sequence of collective methods with
// matching arguments (the engine's negotiation guarantees this). Calls come
// from one thread at a time (the engine's background thread). Data-plane
// methods take element counts of any size; an implementation whose native
// counts are narrower (MPI's int) splits the work itself.
//
// Implementations: transport/mpi (the product), transport/inproc (threads as
// ranks, for logic tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tfmpi/common/status.h"
#include "tfmpi/common/types.h"

namespace tfmpi {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;  // rank among the ranks on this node
  virtual int local_size() const = 0;
  virtual std::string name() const = 0;  // "mpi (Open MPI v4.1.4)", "inproc"

  // out[i] = in[i] reduced over ranks. in == out means in place. `op` is never
  // kAverage here (the engine averages by scaling a sum).
  virtual Status Allreduce(const void* in, void* out, std::size_t count, DataType dtype,
                           ReduceOp op) = 0;
  virtual Status Broadcast(void* buf, std::size_t count, DataType dtype, int root) = 0;
  // Rank r contributes counts[r] elements; out receives them concatenated in
  // rank order. `in` may be this rank's block of out (in place).
  virtual Status Allgatherv(const void* in, void* out, const std::vector<std::size_t>& counts,
                            DataType dtype) = 0;
  // out[i] on rank `root` = in[i] reduced over ranks; out is not written
  // elsewhere (it may be null there). in == out on the root means in place.
  // `op` is never kAverage.
  virtual Status Reduce(const void* in, void* out, std::size_t count, DataType dtype, ReduceOp op,
                        int root) = 0;
  // `in` holds one block per rank, in rank order (counts[r] elements each);
  // out, which must not overlap in, receives this rank's block reduced over
  // ranks (counts[rank()] elements). One call moves sum(counts) elements;
  // the caller keeps that within MaxMessageElements() (Note [Owner layout]).
  // `op` is never kAverage.
  virtual Status ReduceScatter(const void* in, void* out, const std::vector<std::size_t>& counts,
                               DataType dtype, ReduceOp op) = 0;
  virtual Status Barrier() = 0;

  // The largest element count of one transport call from the next call on
  // (bigger buffers go in consecutive chunks; Note [Message size]). Every rank
  // sets the same value before the same call (Note [Autotune]). Transports
  // that never chunk ignore it.
  virtual Status SetMaxMessageElements(std::size_t /*count*/) { return Status::Ok(); }
  // The largest element count of one transport call (0: no limit).
  virtual std::size_t MaxMessageElements() const { return 0; }

  // Control plane used by negotiation.
  virtual Status BitwiseAnd(std::uint64_t* words, std::size_t n) = 0;
  // Rank 0 receives every rank's bytes (others get an empty vector).
  virtual Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) = 0;
  // Rank 0's *data replaces everyone's.
  virtual Status BroadcastFromRoot(std::string* data) = 0;

  // Called once by the engine when it stops after a failure, before it
  // destroys the communicator: no further call will come, and other ranks may
  // be inside a collective this rank will never join, so neither this nor the
  // destructor may wait for them (Note [Engine errors], engine/engine_loop.cc).
  virtual void Abandon() = 0;
};

}  // namespace tfmpi
