#include "tfmpi/runtime/mpi_factory.h"

#include <mpi.h>

#include "tfmpi/transport/mpi/mpi_communicator.h"

namespace tfmpi {
namespace {

// Owns the MPI environment for as long as the communicator lives, and is
// destroyed after it (members are destroyed in reverse order).
class OwningMpiCommunicator final : public Communicator {
 public:
  OwningMpiCommunicator(std::unique_ptr<MpiEnvironment> env, std::unique_ptr<MpiCommunicator> c)
      : env_(std::move(env)), c_(std::move(c)) {}
  int rank() const override { return c_->rank(); }
  int size() const override { return c_->size(); }
  int local_rank() const override { return c_->local_rank(); }
  int local_size() const override { return c_->local_size(); }
  std::string name() const override { return c_->name(); }
  Status Allreduce(const void* in, void* out, std::size_t n, DataType t, ReduceOp op) override {
    return c_->Allreduce(in, out, n, t, op);
  }
  Status Broadcast(void* buf, std::size_t n, DataType t, int root) override {
    return c_->Broadcast(buf, n, t, root);
  }
  Status Allgatherv(const void* in, void* out, const std::vector<std::size_t>& counts,
                    DataType t) override {
    return c_->Allgatherv(in, out, counts, t);
  }
  Status Barrier() override { return c_->Barrier(); }
  Status SetMaxMessageElements(std::size_t n) override { return c_->SetMaxMessageElements(n); }
  Status BitwiseAnd(std::uint64_t* w, std::size_t n) override { return c_->BitwiseAnd(w, n); }
  Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override {
    return c_->GatherToRoot(mine, all);
  }
  Status BroadcastFromRoot(std::string* data) override { return c_->BroadcastFromRoot(data); }
  void Abandon() override {  // Note [Abandoning MPI]
    c_->Abandon();
    env_->Abandon();
  }

 private:
  std::unique_ptr<MpiEnvironment> env_;
  std::unique_ptr<MpiCommunicator> c_;
};

}  // namespace

CommunicatorFactory MakeMpiCommunicatorFactory(const EngineOptions& options) {
  MpiOptions mpi_options;
  mpi_options.watchdog.timeout_seconds = options.peer_timeout_seconds;
  const std::size_t configured = options.max_message_elements;
  return [mpi_options, configured](std::unique_ptr<Communicator>* out) mutable -> Status {
    std::unique_ptr<MpiEnvironment> env;
    TFMPI_RETURN_IF_ERROR(MpiEnvironment::Create(&env));
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    mpi_options.max_message_elements = MessageElementsFor(configured, world);
    std::unique_ptr<MpiCommunicator> comm;
    TFMPI_RETURN_IF_ERROR(MpiCommunicator::Create(MPI_COMM_WORLD, mpi_options, &comm));
    *out = std::make_unique<OwningMpiCommunicator>(std::move(env), std::move(comm));
    return Status::Ok();
  };
}

}  // namespace tfmpi
