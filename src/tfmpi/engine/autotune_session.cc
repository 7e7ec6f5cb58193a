#include "tfmpi/engine/autotune_session.h"

#include <fmt/format.h>

#include <algorithm>

#include "tfmpi/common/logging.h"

namespace tfmpi {
namespace {

// Shown on rank 0 at the default log level: the user asked for the search.
void Announce(const std::string& message) {
  if (LogEnabled(LogLevel::kWarning)) LogMessage(LogLevel::kInfo, message);
}

}  // namespace

AutotuneSession::AutotuneSession(const EngineOptions& options, Communicator* comm,
                                 Executor* executor)
    : comm_(comm),
      executor_(executor),
      max_seconds_(options.autotune.max_seconds),
      min_window_seconds_(options.autotune.min_window_seconds),
      max_window_cycles_(options.autotune.max_window_cycles) {
  planning::TuningPoint start;
  start.message_elements = MessageElementsFor(options.max_message_elements, comm->size());
  start.direct_threshold = executor->fusion().direct_threshold;
  start.fusion_threshold = executor->fusion().fusion_threshold;
  tuner_options_.start = start;  // reported as the settings in use when off
  if (!options.autotune.enabled) return;
  enabled_ = true;
  const AutotuneOptions& a = options.autotune;
  tuner_options_ =
      planning::DefaultTunerOptions(start, !a.fixed_message, !a.fixed_direct, !a.fixed_fusion);
  tuner_options_.same_plan = [this](const planning::TuningPoint& x,
                                    const planning::TuningPoint& y) {
    return planning::SamePlan(cycles_seen_, x, y);
  };
  if (a.fixed_message && a.fixed_direct && a.fixed_fusion) {
    tuner_ = std::make_unique<planning::Tuner>(tuner_options_);  // done: nothing to search
    if (comm->rank() == 0)
      Announce("autotune: the message size and both fusion thresholds are set in the "
               "environment; nothing to tune");
    return;
  }
  if (comm->rank() != 0) return;
  Announce(fmt::format("autotune: searching from {} (windows of {}-{} busy cycles, at most {} s)",
                       planning::Describe(start), kCheckCycles,
                       std::max(kCheckCycles, max_window_cycles_), max_seconds_));
  if (!a.log_path.empty()) {
    log_ = std::fopen(a.log_path.c_str(), "w");
    if (!log_) {
      TFMPI_LOG_ERROR("autotune: cannot write TFMPI_AUTOTUNE_LOG={}; continuing without it",
                      a.log_path);
    } else {
      std::fputs("window,phase,message_elements,direct_threshold,fusion_threshold,cycles,seconds,"
                 "bytes,gb_per_s\n",
                 log_);
      std::fflush(log_);
    }
  }
}

AutotuneSession::~AutotuneSession() {
  if (log_) std::fclose(log_);
}

AutotuneState AutotuneSession::state() const {
  AutotuneState s;
  s.enabled = enabled_;
  s.windows = windows_;
  s.current = tuner_ ? tuner_->current() : tuner_options_.start;
  s.done = tuner_ && tuner_->done();
  return s;
}

namespace {

// Whether `seen` is `items` without its error items (they run no call).
bool SameCalls(const std::vector<planning::FusionItem>& seen,
               const std::vector<planning::FusionItem>& items) {
  std::size_t k = 0;
  for (const planning::FusionItem& it : items) {
    if (it.error) continue;
    if (k == seen.size() || !(seen[k] == it)) return false;
    ++k;
  }
  return k == seen.size();
}

}  // namespace

void AutotuneSession::Observe(const std::vector<planning::FusionItem>& items) {
  if (cycles_seen_.size() >= kMaxCyclesSeen) return;
  // A repeated cycle (the usual case) is recognised without a copy.
  for (const auto& seen : cycles_seen_)
    if (SameCalls(seen, items)) return;
  std::vector<planning::FusionItem> ran;
  ran.reserve(items.size());
  for (const planning::FusionItem& it : items)
    if (!it.error) ran.push_back(it);
  if (!ran.empty()) cycles_seen_.push_back(std::move(ran));
}

void AutotuneSession::StartSearch() {
  tuner_ = std::make_unique<planning::Tuner>(tuner_options_);
  if (tuner_->done() && comm_->rank() == 0)
    Announce(fmt::format("autotune: every candidate runs the same MPI calls as {} in the cycles "
                         "seen; nothing to measure",
                         planning::Describe(tuner_->best())));
}

Status AutotuneSession::Apply(const planning::TuningPoint& point) {
  TFMPI_RETURN_IF_ERROR(comm_->SetMaxMessageElements(point.message_elements));
  executor_->SetFusion({point.fusion_threshold, point.direct_threshold});
  return Status::Ok();
}

void AutotuneSession::Log(int cycles, double seconds, double bytes) {
  if (!log_) return;
  const planning::TuningPoint& p = tuner_->current();
  // Only rank 0 writes: nothing here may throw (fmt::print to a FILE* does on
  // a short write), or rank 0 alone would leave the engine loop.
  const std::string row =
      fmt::format("{},{},{},{},{},{},{:.6f},{:.0f},{:.3f}\n", windows_, tuner_->phase(),
                  p.message_elements, p.direct_threshold, p.fusion_threshold, cycles, seconds,
                  bytes, seconds > 0 ? bytes / seconds / 1e9 : 0.0);
  if (std::fputs(row.c_str(), log_) < 0 || std::fflush(log_) != 0) {
    TFMPI_LOG_ERROR("autotune: writing TFMPI_AUTOTUNE_LOG failed; no more rows are written");
    std::fclose(log_);
    log_ = nullptr;
  }
}

Status AutotuneSession::AfterBusyCycle(std::uint64_t bytes, double seconds,
                                       const std::vector<planning::FusionItem>& items) {
  if (!searching()) return Status::Ok();
  if (warmup_left_ < kWarmupChecks) Observe(items);
  if (started_ == Clock::time_point{}) started_ = Clock::now();
  window_seconds_ += seconds;
  ++cycles_;
  if (++unchecked_ < kCheckCycles) return Status::Ok();
  // A check in this cycle on every rank (busy cycles are the same everywhere).
  unchecked_ = 0;
  if (warmup_left_ > 0) {
    --warmup_left_;
    cycles_ = 0;
    window_seconds_ = 0;
    window_start_bytes_ = bytes;
    if (warmup_left_ == 0) StartSearch();
    return Status::Ok();
  }
  // The time bound as a fraction, so that ranks agree on it even if their
  // TFMPI_AUTOTUNE_SECONDS differed.
  const double mine[3] = {
      window_seconds_, static_cast<double>(bytes - window_start_bytes_),
      std::chrono::duration<double>(Clock::now() - started_).count() / std::max(max_seconds_, 1e-9)};
  double all[3];  // the slowest rank's seconds, the largest bytes, the longest time used
  TFMPI_RETURN_IF_ERROR(comm_->Allreduce(mine, all, 3, DataType::kFloat64, ReduceOp::kMax));
  const bool out_of_time = all[2] > 1;
  // Too short to measure yet (Note [Autotune windows]); a window that moved
  // no bytes (barriers only) is never scored.
  if (!out_of_time && (all[0] < min_window_seconds_ || all[1] == 0) && cycles_ < max_window_cycles_)
    return Status::Ok();
  const int window_cycles = cycles_;
  cycles_ = 0;
  window_seconds_ = 0;
  window_start_bytes_ = bytes;
  ++windows_;
  Log(window_cycles, all[0], all[1]);
  bool changed = all[1] > 0 && tuner_->Record(all[0] / all[1]);
  const bool stopped = out_of_time && !tuner_->done();
  if (stopped) {
    tuner_->Finish();
    changed = true;
  }
  if (changed) TFMPI_RETURN_IF_ERROR(Apply(tuner_->current()));
  if (tuner_->done() && comm_->rank() == 0) {
    const bool kept = tuner_->best() == tuner_->start();
    Announce(fmt::format(
        "autotune: {} after {} window{}{}{}: {} {}", stopped ? "stopped" : "done", windows_,
        windows_ == 1 ? "" : "s",
        stopped ? fmt::format(" (TFMPI_AUTOTUNE_SECONDS={})", max_seconds_) : "",
        tuner_->skipped() ? fmt::format(" ({} candidates skipped: the same MPI calls as their "
                                        "baseline in every cycle seen)",
                                        tuner_->skipped())
                          : "",
        kept ? "kept the defaults," : "now runs with", planning::Describe(tuner_->best())));
  }
  return Status::Ok();
}

}  // namespace tfmpi
