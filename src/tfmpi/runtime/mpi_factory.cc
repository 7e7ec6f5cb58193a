#include "tfmpi/runtime/mpi_factory.h"

#include <mpi.h>

#include <cstring>

#include "tfmpi/common/logging.h"

#include "tfmpi/transport/mpi/mpi_communicator.h"

namespace tfmpi {
namespace {

// Owns the MPI environment for as long as the communicator lives, and is
// destroyed after it (members are destroyed in reverse order).
// Note [Skipping the data]: with TFMPI_SKIP_DATA, allreduces (and
// reduce-scatters) return at once, each rank keeping its own values (the
// output is the input), while
// negotiation, broadcasts, allgathers and barriers still run (a broadcast's
// non-root output has no values of its own to keep; training broadcasts only
// at the start): a step's time with it, against without, is the
// communication the step exposes (docs/performance.md, "Exposed
// communication"). Training is wrong with it.
class OwningMpiCommunicator final : public Communicator {
 public:
  OwningMpiCommunicator(std::unique_ptr<MpiEnvironment> env, std::unique_ptr<MpiCommunicator> c,
                        bool skip_data)
      : env_(std::move(env)), c_(std::move(c)), skip_data_(skip_data) {}
  int rank() const override { return c_->rank(); }
  int size() const override { return c_->size(); }
  int local_rank() const override { return c_->local_rank(); }
  int local_size() const override { return c_->local_size(); }
  std::string name() const override { return c_->name(); }
  Status Allreduce(const void* in, void* out, std::size_t n, DataType t, ReduceOp op) override {
    if (!skip_data_) return c_->Allreduce(in, out, n, t, op);
    if (in != out && n) std::memcpy(out, in, n * DataTypeSize(t));
    return Status::Ok();
  }
  Status Broadcast(void* buf, std::size_t n, DataType t, int root) override {
    return c_->Broadcast(buf, n, t, root);
  }
  Status Allgatherv(const void* in, void* out, const std::vector<std::size_t>& counts,
                    DataType t) override {
    return c_->Allgatherv(in, out, counts, t);
  }
  Status Reduce(const void* in, void* out, std::size_t n, DataType t, ReduceOp op,
                int root) override {
    if (!skip_data_) return c_->Reduce(in, out, n, t, op, root);
    if (c_->rank() == root && in != out && n) std::memcpy(out, in, n * DataTypeSize(t));
    return Status::Ok();
  }
  Status ReduceScatter(const void* in, void* out, const std::vector<std::size_t>& counts,
                       DataType t, ReduceOp op) override {
    if (!skip_data_) return c_->ReduceScatter(in, out, counts, t, op);
    std::size_t before = 0;  // this rank's block, unreduced
    for (int r = 0; r < c_->rank(); ++r) before += counts[static_cast<std::size_t>(r)];
    const std::size_t n = counts[static_cast<std::size_t>(c_->rank())] * DataTypeSize(t);
    if (n) std::memcpy(out, static_cast<const char*>(in) + before * DataTypeSize(t), n);
    return Status::Ok();
  }
  Status Barrier() override { return c_->Barrier(); }
  Status SetMaxMessageElements(std::size_t n) override { return c_->SetMaxMessageElements(n); }
  std::size_t MaxMessageElements() const override { return c_->MaxMessageElements(); }
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
  const bool skip_data_;
};

}  // namespace

CommunicatorFactory MakeMpiCommunicatorFactory(const EngineOptions& options) {
  MpiOptions mpi_options;
  mpi_options.watchdog.timeout_seconds = options.peer_timeout_seconds;
  const std::size_t configured = options.max_message_elements;
  const bool skip_data = options.skip_data;
  return [mpi_options, configured, skip_data](std::unique_ptr<Communicator>* out) mutable -> Status {
    std::unique_ptr<MpiEnvironment> env;
    TFMPI_RETURN_IF_ERROR(MpiEnvironment::Create(&env));
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    mpi_options.max_message_elements = MessageElementsFor(configured, world);
    std::unique_ptr<MpiCommunicator> comm;
    TFMPI_RETURN_IF_ERROR(MpiCommunicator::Create(MPI_COMM_WORLD, mpi_options, &comm));
    if (skip_data && comm->rank() == 0)
      TFMPI_LOG_WARNING("TFMPI_SKIP_DATA is set: allreduces move no data, so training results "
                        "are wrong (a diagnostic, Note [Skipping the data])");
    *out = std::make_unique<OwningMpiCommunicator>(std::move(env), std::move(comm), skip_data);
    return Status::Ok();
  };
}

}  // namespace tfmpi
