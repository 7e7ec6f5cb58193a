// In-process transport: threads act as ranks of one world, exchanging data
// through shared memory. Used by the logic tests to run the real engine at
// world sizes 1..16 without MPI. Reductions run in rank order, so results are
// deterministic.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tfmpi/transport/communicator.h"

namespace tfmpi {

// Shared state of one in-process world. Exchange() is the only primitive: every
// rank deposits bytes and receives every rank's deposit.
class InProcWorld {
 public:
  explicit InProcWorld(int size);
  int size() const { return size_; }
  Status Exchange(int rank, std::string data, std::vector<std::string>* all);
  // Rank `rank` gave up on the world after a failure (Communicator::Abandon):
  // every exchange waiting now or started later fails, as the other processes
  // of an MPI job are stopped when one of them exits without finalising.
  void Abort(int rank);

 private:
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> slots_;
  int arrived_ = 0;
  int read_ = 0;
  bool draining_ = false;
  std::uint64_t generation_ = 0;
  int aborted_by_ = -1;
};

class InProcCommunicator final : public Communicator {
 public:
  InProcCommunicator(std::shared_ptr<InProcWorld> world, int rank);

  int rank() const override { return rank_; }
  int size() const override { return world_->size(); }
  int local_rank() const override { return rank_; }
  int local_size() const override { return world_->size(); }
  std::string name() const override { return "inproc"; }

  Status Allreduce(const void* in, void* out, std::size_t count, DataType dtype,
                   ReduceOp op) override;
  Status Broadcast(void* buf, std::size_t count, DataType dtype, int root) override;
  Status Allgatherv(const void* in, void* out, const std::vector<std::size_t>& counts,
                    DataType dtype) override;
  Status Reduce(const void* in, void* out, std::size_t count, DataType dtype, ReduceOp op,
                int root) override;
  Status ReduceScatter(const void* in, void* out, const std::vector<std::size_t>& counts,
                       DataType dtype, ReduceOp op) override;
  Status Barrier() override;
  Status SetMaxMessageElements(std::size_t count) override {
    max_message_ = count;
    return Status::Ok();
  }
  std::size_t MaxMessageElements() const override { return max_message_; }
  Status BitwiseAnd(std::uint64_t* words, std::size_t n) override;
  Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override;
  Status BroadcastFromRoot(std::string* data) override;
  void Abandon() override { world_->Abort(rank_); }

 private:
  std::shared_ptr<InProcWorld> world_;
  int rank_;
  std::size_t max_message_ = 0;
};

}  // namespace tfmpi
