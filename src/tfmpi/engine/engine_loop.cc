// The engine's background thread: start the communicator, run cycles
// (negotiate, execute, wait), and stop, completing every request.
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#ifdef __linux__
#include <pthread.h>
#endif

#include "tfmpi/common/logging.h"
#include "tfmpi/engine/engine.h"
#include "tfmpi/engine/executor.h"
#include "tfmpi/engine/negotiator.h"
#include "tfmpi/engine/shared_settings.h"
#include "tfmpi/engine/timeline.h"
#include "tfmpi/planning/rank_groups.h"

namespace tfmpi {
namespace {

// Completes every request of `pending` with `status` and empties it.
void FailPending(const Status& status, PendingTable* pending) {
  // Taken out first: completing releases each name's slot (Note [Pending slots]).
  for (Request& r : pending->TakeAll()) {
    Status s = Complete(r, status);
    if (!s.ok()) TFMPI_LOG_ERROR("{}", s.message());
  }
}

std::string NamesOf(const PendingTable& pending) {
  std::string names;
  pending.ForEach([&](const NameSlot& slot) {
    if (names.size() < 200) names += (names.empty() ? "'" : ", '") + slot.name + "'";
  });
  return names;
}

// Rank 0's list of the settings that differ, a "tfmpi: " line each, in one
// write to stderr (other ranks' lines rarely land inside), written before
// the other ranks are released (Note [Reported before released]).
void WriteSettingsReport(const std::string& verdict) {
  std::string text;
  size_t start = 0;
  while (start < verdict.size()) {
    size_t end = verdict.find('\n', start);
    if (end == std::string::npos) end = verdict.size();
    text += "tfmpi: " + verdict.substr(start, end - start) + "\n";
    start = end + 1;
  }
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(2, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // stderr closed: nothing more to do
    done += static_cast<size_t>(n);
  }
}

}  // namespace

// Note [Engine errors]
// Nothing that goes wrong on the background thread ends the process or
// leaves a request without its callback (each fires exactly once: Complete()).
// There are two kinds of failure.
//  * The ranks may no longer agree: a transport call failed, or an exception
//    (a failed TFMPI_ENFORCE, std::bad_alloc, a throwing communicator) came
//    out of negotiation or out of running a group, so this rank may have left
//    a collective the others are in, or skipped one. The engine then issues
//    no further collective: the executor runs no later group of the cycle,
//    every request (pending, incoming and later ones) fails with the failure,
//    and the communicator is abandoned instead of being shut down, since a
//    clean shutdown would wait for the other ranks (Note [Abandoning MPI]).
//    Ranks stuck in a collective this rank never joins end with the job
//    when this process exits (MPI) or fail at once (in-process transport).
//  * A completion callback threw. Its collective completed on every rank and
//    the executor finishes the cycle, so the ranks still agree. This rank
//    then leaves as if shut down, with the error as its exit reason: its
//    pending requests fail, new ones are refused, and the other ranks learn
//    from its leave notice which rank stopped and why.
// An allgather output allocator that fails (nullptr, or an exception such as
// std::bad_alloc) fails that request only; this rank still takes part in the
// collective through scratch memory.
void Engine::Run(CommunicatorFactory factory) {
  std::unique_ptr<Communicator> comm;
  Timeline timeline;
  Status s;
  bool abandon = false;  // the start-up check failed on this rank alone (Note [Abandoning MPI])
  try {
    s = factory(&comm);
    // Named after the factory ran: the threads MPI_Init starts (Open MPI's
    // progress and event threads) inherit the name of the thread that
    // creates them, and took this one's, so per-thread CPU of
    // "tfmpi-engine" (top -H, ps -L, bench/hosts/engine_cpu.py) mixed them in.
#ifdef __linux__
    pthread_setname_np(pthread_self(), "tfmpi-engine");  // shown by top -H, ps -L, gdb
#endif
    if (s.ok() && !comm) s = Status::Internal("the communicator factory made no communicator");
    // Open the timeline before Start() returns: its clock starts at Open, and
    // requests enqueued earlier would get negative timestamps.
    if (s.ok() && comm->rank() == 0 && !options_.timeline_path.empty()) {
      SetLogRank(comm->rank(), comm->size());
      Status ts = timeline.Open(options_.timeline_path);
      if (!ts.ok()) TFMPI_LOG_ERROR("{}; continuing without a timeline", ts.message());
    }
    if (s.ok()) {
      abandon = true;  // an exception in the check leaves the other ranks inside it
      bool disagreed = false;
      s = AgreeOnSettings(comm.get(), SharedSettings(options_, comm->size()), &disagreed,
                          options_.report_settings ? options_.report_settings
                                                   : WriteSettingsReport);
      abandon = !s.ok() && !disagreed;  // ranks that disagree all fail here, together
    }
  } catch (...) {
    s = StatusFromCurrentException("tfmpi could not start its engine");
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
  if (!s.ok()) {
    if (abandon && comm) comm->Abandon();
    return;
  }
  SetLogRank(rank_, size_);

  PendingTable pending(&names_);
  std::vector<Request> arrived;
  Status failure;
  try {
    failure = Serve(comm.get(), &timeline, &pending, &arrived);
  } catch (...) {
    failure = StatusFromCurrentException("unexpected exception on the engine thread");
  }

  const Status final_status =
      failure.ok() ? Status::Aborted("tfmpi shut down before this collective completed")
                   : Status::Internal(fmt::format(
                         "tfmpi stopped on rank {} after a failure and runs no further "
                         "collectives in this process: {}",
                         rank_, failure.message()));
  if (!failure.ok()) TFMPI_LOG_ERROR("{}", final_status.message());
  std::vector<Request> incoming;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure.ok())
      stop_status_ = final_status;
    else if (stop_status_.ok())  // not already failed (LeaveAfterError)
      stop_status_ = Status::FailedPrecondition("tfmpi has been shut down");
    incoming.swap(incoming_);
  }
  FailAll(final_status, &arrived);
  FailPending(final_status, &pending);
  FailAll(final_status, &incoming);
  try {
    timeline.Close();
    if (!failure.ok()) comm->Abandon();
    comm.reset();  // finalises MPI here, on the thread that initialised it (unless abandoned)
  } catch (...) {
    TFMPI_LOG_ERROR("{}", StatusFromCurrentException("while stopping the engine").message());
  }
}

Status Engine::Serve(Communicator* comm, Timeline* timeline, PendingTable* pending,
                     std::vector<Request>* arrived) {
  NegotiationOptions nopts;
  nopts.cache_capacity = options_.cache_capacity;
  auto seconds = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  // Cached requests waiting longer than promote_after are reported to the
  // coordinator, which is what lets it see stalls and deadlocks.
  nopts.promote_after = Clock::duration::max();
  nopts.stall_warning = Clock::duration::zero();
  if (options_.stall_warning_seconds > 0) {
    nopts.promote_after = seconds(options_.stall_warning_seconds / 2);
    nopts.stall_warning = nopts.promote_after;
  }
  if (options_.stall_timeout_seconds > 0) {
    nopts.deadlock_timeout = seconds(options_.stall_timeout_seconds);
    nopts.promote_after = std::min(nopts.promote_after, seconds(options_.stall_timeout_seconds / 2));
  }
  Negotiator negotiator(comm, nopts);
  Executor executor(comm, {options_.fusion_threshold, options_.direct_threshold}, timeline,
                    [this](const ExecutorStats& es) {
                      std::lock_guard<std::mutex> lock(mu_);
                      stats_.tensors = es.tensors;
                      stats_.groups = es.groups;
                      stats_.fused_groups = es.fused_groups;
                      stats_.bytes = es.bytes;
                    });
  AutotuneSession tuning(options_, comm, &executor);  // Note [Autotune]
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.autotune = tuning.state();
  }
  TFMPI_LOG_INFO("engine started on {} with {} ranks", transport_name_, size_);

  const auto cycle = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(options_.cycle_time_ms));
  NegotiationResult result;
  Status leave_error;        // a callback threw: this rank leaves (Note [Engine errors])
  std::string leave_reason;  // what the other ranks are told
  constexpr int kMaxIdleDoublings = 3;  // idle cycles of up to 8 x TFMPI_CYCLE_TIME_MS
  int idle_doublings = 0;
  while (true) {
    const Clock::time_point cycle_start = Clock::now();
    bool want_shutdown;
    std::string exit_reason;
    {
      std::lock_guard<std::mutex> lock(mu_);
      arrived->swap(incoming_);
      want_shutdown = shutdown_requested_ || !leave_error.ok();
      if (want_shutdown) exit_reason = leave_error.ok() ? exit_reason_ : leave_reason;
    }
    if (!leave_error.ok()) FailAll(leave_error, arrived);  // enqueued before the refusal
    for (Request& r : *arrived) pending->Add(std::move(r));
    arrived->clear();
    TFMPI_RETURN_IF_ERROR(negotiator.Negotiate(pending, want_shutdown, exit_reason, &result));
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
    Status callback_error;
    TFMPI_RETURN_IF_ERROR(executor.Execute(result.responses, result.slots, pending, decided, &callback_error));
    if (tuning.searching() && !result.responses.empty()) {
      const double executed = std::chrono::duration<double>(Clock::now() - decided).count();
      TFMPI_RETURN_IF_ERROR(
          tuning.AfterBusyCycle(executor.stats().bytes, executed, executor.planned_items()));
      std::lock_guard<std::mutex> lock(mu_);
      stats_.autotune = tuning.state();
    }
    if (!callback_error.ok() && leave_error.ok()) {
      leave_reason = callback_error.message();
      leave_error = LeaveAfterError(callback_error, pending);
    }
    if (result.peer_leaving && !want_shutdown && !pending->empty())
      FailPendingAfterPeerLeft(pending, negotiator.leavers());
    if (result.shutdown) return Status::Ok();
    // Note [Cycle phase]: timing the next cycle from this rank's own start
    // would keep any offset between ranks forever, and the rank that starts
    // first would wait inside the AND every cycle. The AND's return is a
    // moment all ranks share, so cycles are timed from it.
    // Note [Idle cycles]: while no rank has anything pending, each cycle waits
    // twice as long as the last, up to kMaxIdleDoublings doublings, so an idle
    // engine costs little CPU. A timed cycle decides nothing a request would
    // not start at once (below); it only lets ranks see a peer's leave notice
    // or a stall. So the period (TFMPI_CYCLE_TIME_MS) is 5 ms by default, not
    // 1: timed ANDs between the steps of a small CNN across two emulated hosts
    // woke both engine threads on hosts of one core, over TCP, and a request
    // arriving during one waited for it. With 5 ms the run had a third of the
    // cycles and its steps were a little faster, and the tiny model's step at
    // -np 2 on one host 8% faster (docs/performance-history.md, "Idle cycles
    // between steps"). An idle rank then sees a leave notice within 40 ms
    // (8 x 5 ms).
    // Note [Waking the cycle]: a request should not wait for a timer; the
    // cycle that decides it can run as soon as every rank has it. So
    //  * Enqueue wakes a rank waiting for its next cycle at once (a grouped
    //    op's requests arrive together: EnqueueAll), and
    //  * a rank that still holds undecided requests after a cycle (a peer had
    //    not submitted them yet) starts the next cycle without waiting. Its
    //    AND then waits, without spinning (Note [Waiting without spinning]),
    //    until the late peer joins, which that peer does the moment it
    //    submits. Waiting for the timer instead cost a small model's
    //    collectives up to a whole cycle (seen in timelines at -np 2).
    // A rank with nothing pending waits for its own requests or its timer.
    idle_doublings = result.all_idle ? std::min(idle_doublings + 1, kMaxIdleDoublings) : 0;
    if (!pending->empty()) continue;
    std::unique_lock<std::mutex> lock(mu_);
    const Clock::time_point next = result.synced_at + cycle * (1 << idle_doublings);
    waiting_ = true;
    cv_.wait_until(lock, next, [&] {
      return (shutdown_requested_ && !want_shutdown) || !incoming_.empty();
    });
    waiting_ = false;
  }
}

Status Engine::LeaveAfterError(const Status& error, PendingTable* pending) {
  Status s = Status::Internal(fmt::format(
      "tfmpi stopped on rank {} after an error on its engine thread: {}", rank_, error.message()));
  TFMPI_LOG_ERROR("{}", s.message());
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_status_ = s;
  }
  FailPending(s, pending);
  return s;
}

// Note [Ranks that stop early]
// A rank shuts down only after its own collectives completed, and those
// complete on every rank in the same cycle. So once some rank is leaving,
// whatever is still pending elsewhere names tensors the leaving rank will
// never submit (its data ran out first, it took another branch, or its
// program failed): waiting would hang, so those requests fail now, with a
// message that says why. Each leaving rank's leave notice (Note [Negotiation
// protocol]) names it, with the error it stopped on if its program gave one
// (Engine::SetExitReason; Python's tfmpi.set_exit_reason). A rank that stops
// with an error has failed its requests or will not wait for them, so the
// coordinator withdraws what that rank reported before: a tensor the others
// submit later is never decided with it (it would not run there), and fails
// here instead.
void Engine::FailPendingAfterPeerLeft(PendingTable* pending,
                                      const std::map<int, std::string>& leavers) {
  const Status s = Status::Aborted(planning::PeerLeftMessage(rank_, NamesOf(*pending), leavers));
  TFMPI_LOG_ERROR("{}", s.message());
  FailPending(s, pending);
}

}  // namespace tfmpi
