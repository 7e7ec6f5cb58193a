// ForwardingCommunicator passes every call to an inner communicator. Fault
// injection tests (logic and MPI tiers) derive from it and override the calls
// they break.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tfmpi/transport/communicator.h"

namespace tfmpi::testing {

class ForwardingCommunicator : public Communicator {
 public:
  explicit ForwardingCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  int local_rank() const override { return inner_->local_rank(); }
  int local_size() const override { return inner_->local_size(); }
  std::string name() const override { return inner_->name(); }
  Status Allreduce(const void* in, void* out, std::size_t count, DataType dtype,
                   ReduceOp op) override {
    return inner_->Allreduce(in, out, count, dtype, op);
  }
  Status Broadcast(void* buf, std::size_t count, DataType dtype, int root) override {
    return inner_->Broadcast(buf, count, dtype, root);
  }
  Status Allgatherv(const void* in, void* out, const std::vector<std::size_t>& counts,
                    DataType dtype) override {
    return inner_->Allgatherv(in, out, counts, dtype);
  }
  Status Reduce(const void* in, void* out, std::size_t count, DataType dtype, ReduceOp op,
                int root) override {
    return inner_->Reduce(in, out, count, dtype, op, root);
  }
  Status ReduceScatter(const void* in, void* out, const std::vector<std::size_t>& counts,
                       DataType dtype, ReduceOp op) override {
    return inner_->ReduceScatter(in, out, counts, dtype, op);
  }
  Status Barrier() override { return inner_->Barrier(); }
  Status SetMaxMessageElements(std::size_t n) override { return inner_->SetMaxMessageElements(n); }
  std::size_t MaxMessageElements() const override { return inner_->MaxMessageElements(); }
  Status BitwiseAnd(std::uint64_t* words, std::size_t n) override {
    return inner_->BitwiseAnd(words, n);
  }
  Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override {
    return inner_->GatherToRoot(mine, all);
  }
  Status BroadcastFromRoot(std::string* data) override { return inner_->BroadcastFromRoot(data); }
  void Abandon() override { inner_->Abandon(); }

 private:
  std::unique_ptr<Communicator> inner_;
};

// Wraps a rank's communicator (RunEngines), e.g. in a fault injector.
using WrapCommunicator =
    std::function<std::unique_ptr<Communicator>(int rank, std::unique_ptr<Communicator> inner)>;

}  // namespace tfmpi::testing
