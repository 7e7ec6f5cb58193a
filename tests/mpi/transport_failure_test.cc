// Note [Abandoning MPI]: a transport failure on rank 0 alone. Its allreduce
// fails (injected) while the other ranks are inside theirs. Rank 0's request
// fails with the error, its engine stops and refuses new requests without
// finalising MPI, and rank 0 exits: mpiexec then ends the job, so the ranks
// left inside the collective do not hang. The job's exit status is an error
// by design; CTest passes on rank 0's "RANK 0 STOPPED CLEANLY" line and fails
// at its timeout if anything hangs.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "forwarding_communicator.h"
#include "tfmpi/engine/completion.h"
#include "tfmpi/engine/engine.h"
#include "tfmpi/runtime/mpi_factory.h"

namespace tfmpi {
namespace {

class FailingAllreduce final : public testing::ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  Status Allreduce(const void*, void*, std::size_t, DataType, ReduceOp) override {
    return Status::Internal("injected allreduce failure");
  }
};

Request Sum(const std::string& name, float* x, DoneCallback done) {
  Request req;
  req.meta.name = name;
  req.meta.shape = {1};
  req.input = req.output = x;
  req.done = std::move(done);
  return req;
}

int Main() {
  const EngineOptions options;
  CommunicatorFactory mpi = MakeMpiCommunicatorFactory(options);
  std::unique_ptr<Engine> engine;
  Status s = Engine::Start(
      options,
      [&](std::unique_ptr<Communicator>* out) {
        TFMPI_RETURN_IF_ERROR(mpi(out));
        if ((*out)->rank() == 0) *out = std::make_unique<FailingAllreduce>(std::move(*out));
        return Status::Ok();
      },
      &engine);
  if (!s.ok()) {
    fmt::print(stderr, "the engine did not start: {}\n", s.ToString());
    return 2;
  }
  const int rank = engine->rank();
  float x = 1;
  Completion done;
  s = engine->Enqueue(Sum("x", &x, done.Callback()));
  if (!s.ok() || !done.WaitFor(std::chrono::seconds(60), &s)) {
    fmt::print(stderr, "rank {}: 'x' did not complete within 60 s (a hang): {}\n", rank,
               s.ToString());
    std::fflush(stderr);
    std::_Exit(3);
  }
  if (rank != 0) {  // rank 0 never joins 'x': mpiexec must end this rank before it gets here
    fmt::print(stderr, "rank {}: 'x' completed: {}\n", rank, s.ToString());
    return 1;
  }
  engine->Shutdown();  // stopped already; this only joins its thread
  float y = 1;
  const Status refused = engine->Enqueue(Sum("y", &y, nullptr));
  const bool ok = s.code() == StatusCode::kInternal &&
                  s.message().find("injected allreduce failure") != std::string::npos &&
                  refused.code() == StatusCode::kInternal &&
                  refused.message().find("runs no further collectives") != std::string::npos;
  fmt::print("{} {} | {}\n", ok ? "RANK 0 STOPPED CLEANLY:" : "RANK 0 FAILED:", s.ToString(),
             refused.ToString());
  std::fflush(stdout);
  return ok ? 0 : 1;  // exits without MPI_Finalize: mpiexec ends the other ranks
}

}  // namespace
}  // namespace tfmpi

int main() { return tfmpi::Main(); }
