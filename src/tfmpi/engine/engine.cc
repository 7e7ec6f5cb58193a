#include "tfmpi/engine/engine.h"

#include <fmt/format.h>

#include <algorithm>
#ifdef __linux__
#include <pthread.h>
#endif

#include "tfmpi/common/logging.h"
#include "tfmpi/engine/executor.h"
#include "tfmpi/engine/negotiator.h"
#include "tfmpi/engine/timeline.h"

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

Status Engine::Enqueue(Request request) {
  TFMPI_RETURN_IF_ERROR(Validate(request));
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return stop_status_;
    if (shutdown_requested_)
      return Status::FailedPrecondition("tfmpi is shutting down; no new collectives accepted");
    if (!in_flight_.insert(request.meta.name).second)
      return Status::InvalidArgument(fmt::format(
          "a request named '{}' is already in flight on rank {}; names must be unique among "
          "in-flight requests (wait for the first one, or use another name)",
          request.meta.name, rank_));
    // Release the name before the caller hears back, so it can reuse it at once.
    DoneCallback user = std::move(request.done);
    request.done = [this, name = request.meta.name, user = std::move(user)](const Status& s) {
      {
        std::lock_guard<std::mutex> l(mu_);
        in_flight_.erase(name);
      }
      if (user) user(s);
    };
    request.submitted = Clock::now();
    incoming_.push_back(std::move(request));
    wake = idle_wait_;
  }
  if (wake) cv_.notify_all();
  return Status::Ok();
}

void Engine::FailAll(const Status& status, std::vector<Request>* requests) {
  for (Request& r : *requests)
    if (r.done) r.done(status);
  requests->clear();
}

// Note [Ranks that stop early]
// A rank shuts down only after its own collectives completed, and those
// complete on every rank in the same cycle. So once some rank is leaving,
// whatever is still pending elsewhere names tensors the leaving rank will
// never submit (its data ran out first, or it took another branch): waiting
// would hang, so those requests fail now, with a message that says why.
void Engine::FailPendingAfterPeerLeft(PendingTable* pending) {
  std::vector<Request> doomed;
  std::string names;
  for (auto& [name, p] : *pending) {
    if (names.size() < 200) names += (names.empty() ? "'" : ", '") + name + "'";
    doomed.push_back(std::move(p.request));
  }
  pending->clear();
  Status s = Status::Aborted(fmt::format(
      "another rank has finished (shut tfmpi down) while rank {} still waits for {}: the ranks "
      "ran different numbers of steps or collectives. Check that every rank sees the same "
      "amount of data (with tfmpirun, every rank must read the same batches).",
      rank_, names));
  TFMPI_LOG_ERROR("{}", s.message());
  FailAll(s, &doomed);
}

void Engine::Run(CommunicatorFactory factory) {
#ifdef __linux__
  pthread_setname_np(pthread_self(), "tfmpi-engine");  // shown by top -H, ps -L, gdb
#endif
  std::unique_ptr<Communicator> comm;
  Status s = factory(&comm);
  // Open the timeline before Start() returns: its clock starts at Open, and
  // requests enqueued earlier would get negative timestamps.
  Timeline timeline;
  if (s.ok() && comm->rank() == 0 && !options_.timeline_path.empty()) {
    SetLogRank(comm->rank(), comm->size());
    Status ts = timeline.Open(options_.timeline_path);
    if (!ts.ok()) TFMPI_LOG_ERROR("{}; continuing without a timeline", ts.message());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    start_status_ = s;
    if (s.ok()) {
      rank_ = comm->rank();
      size_ = comm->size();
      local_rank_ = comm->local_rank();
      local_size_ = comm->local_size();
      transport_name_ = comm->name();
    }
    started_ = true;
  }
  cv_.notify_all();
  if (!s.ok()) return;
  SetLogRank(rank_, size_);

  NegotiationOptions nopts;
  nopts.cache_capacity = options_.cache_capacity;
  auto half_stall = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.stall_warning_seconds / 2));
  auto seconds = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  // Cached requests waiting longer than promote_after are reported to the
  // coordinator, which is what lets it see stalls and deadlocks.
  nopts.promote_after = Clock::duration::max();
  nopts.stall_warning = Clock::duration::zero();
  if (options_.stall_warning_seconds > 0) {
    nopts.promote_after = half_stall;
    nopts.stall_warning = half_stall;
  }
  if (options_.stall_timeout_seconds > 0) {
    nopts.deadlock_timeout = seconds(options_.stall_timeout_seconds);
    nopts.promote_after = std::min(nopts.promote_after, seconds(options_.stall_timeout_seconds / 2));
  }
  Negotiator negotiator(comm.get(), nopts);
  Executor executor(comm.get(), {options_.fusion_threshold, options_.direct_threshold},
                    &timeline, [this](const ExecutorStats& es) {
                      std::lock_guard<std::mutex> lock(mu_);
                      stats_.tensors = es.tensors;
                      stats_.groups = es.groups;
                      stats_.fused_groups = es.fused_groups;
                      stats_.bytes = es.bytes;
                    });
  TFMPI_LOG_INFO("engine started on {} with {} ranks", transport_name_, size_);

  const auto cycle = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(options_.cycle_time_ms));
  PendingTable pending;
  std::vector<Request> arrived;  // this cycle's new requests, taken under the lock
  NegotiationResult result;
  Status failure;
  constexpr int kMaxIdleDoublings = 3;  // idle cycles of up to 8 x TFMPI_CYCLE_TIME_MS
  int idle_doublings = 0;
  while (true) {
    const Clock::time_point cycle_start = Clock::now();
    bool want_shutdown;
    {
      std::lock_guard<std::mutex> lock(mu_);
      arrived.swap(incoming_);
      want_shutdown = shutdown_requested_;
    }
    for (Request& r : arrived) {
      std::string name = r.meta.name;
      pending.try_emplace(std::move(name)).first->second.request = std::move(r);
    }
    arrived.clear();
    failure = negotiator.Negotiate(&pending, want_shutdown, &result);
    const Clock::time_point decided = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      const double neg = std::chrono::duration<double>(decided - cycle_start).count();
      ++stats_.cycles;
      stats_.negotiation_seconds += neg;
      if (!result.responses.empty()) {
        ++stats_.busy_cycles;
        stats_.busy_negotiation_seconds += neg;
      }
      stats_.full_rounds += result.full_round;
      stats_.cache_hits += result.cache_hits;
    }
    if (failure.ok()) failure = executor.Execute(result.responses, &pending, decided);
    if (failure.ok() && result.peer_leaving && !want_shutdown && !pending.empty())
      FailPendingAfterPeerLeft(&pending);
    if (!failure.ok() || result.shutdown) break;
    // Note [Cycle phase]: timing the next cycle from this rank's own start
    // would keep any offset between ranks forever, and the rank that starts
    // first would wait inside the AND every cycle. The AND's return is a
    // moment all ranks share, so cycles are timed from it.
    // Note [Idle cycles]: while no rank has anything pending, each cycle waits
    // twice as long as the last, up to kMaxIdleDoublings doublings, so an idle
    // engine costs little CPU. A request enqueued meanwhile wakes this rank at
    // once; peers wake for their own requests (in data-parallel training they
    // submit the same tensors at about the same time) or at the end of their
    // idle wait, whichever comes first.
    idle_doublings = result.all_idle ? std::min(idle_doublings + 1, kMaxIdleDoublings) : 0;
    std::unique_lock<std::mutex> lock(mu_);
    const Clock::time_point next =
        failure.ok() ? result.synced_at + cycle * (1 << idle_doublings) : cycle_start + cycle;
    idle_wait_ = idle_doublings > 0;
    cv_.wait_until(lock, next, [&] {
      return (shutdown_requested_ && !want_shutdown) || (idle_wait_ && !incoming_.empty());
    });
    idle_wait_ = false;
  }

  Status final_status =
      failure.ok() ? Status::Aborted("tfmpi shut down before this collective completed")
                   : Status::Internal(fmt::format("tfmpi stopped after a transport failure: {}",
                                                  failure.message()));
  if (!failure.ok()) TFMPI_LOG_ERROR("{}", final_status.message());
  std::vector<Request> leftovers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    stop_status_ = failure.ok()
                       ? Status::FailedPrecondition("tfmpi has been shut down")
                       : final_status;
    for (Request& r : incoming_) leftovers.push_back(std::move(r));
    incoming_.clear();
  }
  for (auto& [name, p] : pending) leftovers.push_back(std::move(p.request));
  pending.clear();
  FailAll(final_status, &leftovers);
  timeline.Close();
  comm.reset();  // finalises MPI here, on the thread that initialised it
}

}  // namespace tfmpi
