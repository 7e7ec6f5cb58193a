// MPI implementation of Communicator over a private duplicate of a parent
// communicator (MPI_COMM_WORLD by default), so user MPI traffic can't collide
// with the engine's.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tfmpi/transport/communicator.h"
#include "tfmpi/transport/mpi/mpi_handles.h"
#include "tfmpi/transport/mpi/peer_watchdog.h"

namespace tfmpi {

struct MpiOptions {
  // Largest element count passed to one MPI call; larger buffers are split.
  // MPI counts are int, so this is at most INT_MAX; tests lower it to
  // exercise the splitting.
  std::size_t max_message_elements = 2147483647;
  // Heartbeats with the neighbours (Note [Lost peers], planning/liveness.h).
  PeerWatchdogOptions watchdog;
};

// Owns MPI initialisation: initialises MPI (asking for MPI_THREAD_MULTIPLE)
// unless it already is, and finalises it only if it initialised it.
class MpiEnvironment {
 public:
  static Status Create(std::unique_ptr<MpiEnvironment>* out);
  ~MpiEnvironment();
  int thread_level() const { return thread_level_; }
  // After a failure: never call MPI_Finalize, which waits for every rank
  // (Note [Abandoning MPI], mpi_communicator.cc).
  void Abandon() { owns_ = false; }

 private:
  MpiEnvironment() = default;
  bool owns_ = false;
  int thread_level_ = 0;
};

class MpiCommunicator final : public Communicator {
 public:
  static Status Create(MPI_Comm parent, const MpiOptions& options,
                       std::unique_ptr<MpiCommunicator>* out);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string name() const override;

  Status Allreduce(const void* in, void* out, std::size_t count, DataType dtype,
                   ReduceOp op) override;
  Status Broadcast(void* buf, std::size_t count, DataType dtype, int root) override;
  Status Allgatherv(const void* in, void* out, const std::vector<std::size_t>& counts,
                    DataType dtype) override;
  Status Barrier() override;
  Status BitwiseAnd(std::uint64_t* words, std::size_t n) override;
  Status SetMaxMessageElements(std::size_t count) override;
  std::size_t MaxMessageElements() const override { return options_.max_message_elements; }
  Status Reduce(const void* in, void* out, std::size_t count, DataType dtype, ReduceOp op,
                int root) override;
  Status ReduceScatter(const void* in, void* out, const std::vector<std::size_t>& counts,
                       DataType dtype, ReduceOp op) override;
  Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override;
  Status BroadcastFromRoot(std::string* data) override;
  void Abandon() override;

 private:
  MpiCommunicator() = default;
  MPI_Datatype TypeFor(DataType dtype) const;
  Status OpFor(DataType dtype, ReduceOp op, MPI_Op* out) const;

  MpiOptions options_;
  mpi::Comm comm_;
  mpi::Comm local_comm_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  mpi::Datatype half_type_;      // 2 opaque bytes, for float16 and bfloat16
  mpi::Op f16_ops_[4];           // sum, min, max, product
  mpi::Op bf16_ops_[4];
  std::unique_ptr<PeerWatchdog> watchdog_;  // null: not watching (size 1, off, thread level)
};

// "MPI_Allreduce failed: <MPI error string>" for a non-success MPI return code.
Status MpiStatus(int rc, const char* what);

// A private duplicate of `parent` whose errors are returned instead of ending
// the process, with this process's rank and the size.
Status DuplicateComm(MPI_Comm parent, const char* what, mpi::Comm* out, int* rank, int* size);

}  // namespace tfmpi
