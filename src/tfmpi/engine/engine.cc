// The caller's side of the engine: start, enqueue, shut down. The background
// thread's side is engine_loop.cc.
#include "tfmpi/engine/engine.h"

#include <fmt/format.h>

#include "tfmpi/common/logging.h"

namespace tfmpi {

Status Engine::Start(const EngineOptions& options, CommunicatorFactory factory,
                     std::unique_ptr<Engine>* out) {
  std::unique_ptr<Engine> engine(new Engine(options));
  SetLogLevel(options.log_level);
  Engine* e = engine.get();
  e->thread_ = std::thread([e, f = std::move(factory)]() mutable { e->Run(std::move(f)); });
  std::unique_lock<std::mutex> lock(e->mu_);
  e->cv_.wait(lock, [e] { return e->started_; });
  if (!e->start_status_.ok()) {
    Status s = e->start_status_;
    lock.unlock();
    e->thread_.join();
    return s;
  }
  lock.unlock();
  *out = std::move(engine);
  return Status::Ok();
}

Engine::~Engine() { Shutdown(); }

void Engine::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_requested_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

EngineStats Engine::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Status Engine::Validate(const Request& r) const {
  const TensorMeta& m = r.meta;
  if (m.name.empty()) return Status::InvalidArgument("a request needs a non-empty tensor name");
  std::int64_t elements = 1;
  for (std::int64_t d : m.shape) {
    if (d < 0)
      return Status::InvalidArgument(fmt::format("tensor '{}': negative dimension in shape {}",
                                                 m.name, ShapeToString(m.shape)));
    if (d != 0 && elements > (std::int64_t{1} << 62) / d)
      return Status::InvalidArgument(fmt::format("tensor '{}': shape {} is too large", m.name,
                                                 ShapeToString(m.shape)));
    elements *= d;
  }
  const bool has_data = elements > 0;
  switch (m.kind) {
    case CollectiveKind::kAllreduce: {
      Status s = CheckReduceSupported(m.dtype, m.op);
      if (!s.ok()) return Status::InvalidArgument(fmt::format("tensor '{}': {}", m.name, s.message()));
      if (has_data && (!r.input || !r.output))
        return Status::InvalidArgument(fmt::format("tensor '{}': null buffer", m.name));
      break;
    }
    case CollectiveKind::kBroadcast:
      if (m.root < 0 || m.root >= size_)
        return Status::InvalidArgument(fmt::format(
            "tensor '{}': broadcast root {} is not a rank (world size {})", m.name, m.root, size_));
      if (has_data && (!r.output || (rank_ == m.root && !r.input)))
        return Status::InvalidArgument(fmt::format("tensor '{}': null buffer", m.name));
      break;
    case CollectiveKind::kReduce: {
      if (m.root < 0 || m.root >= size_)
        return Status::InvalidArgument(fmt::format(
            "tensor '{}': reduce root {} is not a rank (world size {})", m.name, m.root, size_));
      Status s = CheckReduceSupported(m.dtype, m.op);
      if (!s.ok()) return Status::InvalidArgument(fmt::format("tensor '{}': {}", m.name, s.message()));
      if (has_data && (!r.input || !r.output))
        return Status::InvalidArgument(fmt::format("tensor '{}': null buffer", m.name));
      break;
    }
    case CollectiveKind::kAllgather:
      if (m.shape.empty())
        return Status::InvalidArgument(fmt::format(
            "tensor '{}': allgather needs at least one dimension (got a scalar)", m.name));
      if (has_data && !r.input)
        return Status::InvalidArgument(fmt::format("tensor '{}': null buffer", m.name));
      break;
    case CollectiveKind::kBarrier:
      break;
  }
  return Status::Ok();
}

Status Engine::Enqueue(Request request) {  // EnqueueAll of one, without its vectors
  Status s = Validate(request);
  if (!s.ok()) return s;
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = AdmitLocked(std::move(request), Clock::now());
    wake = s.ok() && TakeWaiterLocked();
  }
  if (wake) cv_.notify_all();
  return s;
}

std::vector<Status> Engine::EnqueueAll(std::vector<Request> requests) {
  std::vector<Status> statuses(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) statuses[i] = Validate(requests[i]);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Clock::time_point now = Clock::now();
    bool admitted = false;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (statuses[i].ok()) statuses[i] = AdmitLocked(std::move(requests[i]), now);
      admitted = admitted || statuses[i].ok();
    }
    wake = admitted && TakeWaiterLocked();
  }
  if (wake) cv_.notify_all();  // Note [Waking the cycle], engine_loop.cc
  return statuses;
}

// Whether the loop waits for its next cycle, and so must be woken. The first
// enqueue that wakes it clears the flag, so requests that arrive before the
// loop runs again do not each pay for a futex wake.
bool Engine::TakeWaiterLocked() {
  const bool waiting = waiting_;
  waiting_ = false;
  return waiting;
}

Status Engine::AdmitLocked(Request request, Clock::time_point now) {
  if (!stop_status_.ok()) return stop_status_;
  if (shutdown_requested_)
    return Status::FailedPrecondition("tfmpi is shutting down; no new collectives accepted");
  if (!names_.Admit(&request))  // attaches the name's slot (Note [Pending slots])
    return Status::InvalidArgument(fmt::format(
        "a request named '{}' is already in flight on rank {}; names must be unique among "
        "in-flight requests (wait for the first one, or use another name)",
        request.meta.name, rank_));
  request.submitted = now;
  incoming_.push_back(std::move(request));
  return Status::Ok();
}

void Engine::SetExitReason(std::string reason) {
  std::lock_guard<std::mutex> lock(mu_);
  exit_reason_ = std::move(reason);
}

void Engine::FailAll(const Status& status, std::vector<Request>* requests) {
  for (Request& r : *requests) {
    Status s = Complete(r, status);  // the engine is failing these already: log and go on
    if (!s.ok()) TFMPI_LOG_ERROR("{}", s.message());
  }
  requests->clear();
}

}  // namespace tfmpi
