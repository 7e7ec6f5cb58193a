// AutotuneSession: runs the autotune search (planning/autotune.h) inside the
// engine loop. It counts busy cycles into windows, agrees on each window's
// score with one small allreduce at the window's end (the same cycle on every
// rank), feeds the Tuner and applies its settings to the executor and the
// communicator. Note [Autotune].
//
// Note [Autotune windows]
// A window must be long enough that its time measures the settings, not the
// noise of one cycle: the small CNN's steps execute in about a millisecond,
// and 5 of them varied by 10x between windows on this shared machine. So every
// kCheckCycles busy cycles the ranks agree (the allreduce) on the window so
// far, and close it once the slowest rank spent min_window_seconds (20 ms)
// executing in it, or after max_window_cycles (50) busy cycles: a model whose
// steps move megabytes closes windows every 5 cycles, a tiny one every 50.
// The check is the same collective in the same cycle on every rank.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>

#include "tfmpi/engine/executor.h"
#include "tfmpi/engine/options.h"
#include "tfmpi/engine/request.h"
#include "tfmpi/planning/autotune.h"
#include "tfmpi/transport/communicator.h"

namespace tfmpi {

struct AutotuneState {
  bool enabled = false;
  bool done = false;
  std::uint64_t windows = 0;  // measured windows so far
  planning::TuningPoint current;
};

class AutotuneSession {
 public:
  // Busy cycles between checks (Note [Autotune windows]), and checks
  // discarded at the start (the first steps run slower: allocation, caches,
  // the response cache filling).
  // Cycles are observed for SamePlan only after the first check: the first
  // cycles run once (initial broadcasts, the traced step) and would make
  // candidates look different that are the same in the steady state.
  static constexpr int kCheckCycles = 5;
  static constexpr int kWarmupChecks = 2;

  AutotuneSession(const EngineOptions& options, Communicator* comm, Executor* executor);
  ~AutotuneSession();
  AutotuneSession(const AutotuneSession&) = delete;
  AutotuneSession& operator=(const AutotuneSession&) = delete;

  bool searching() const { return enabled_ && !(tuner_ && tuner_->done()); }
  AutotuneState state() const;

  // After a busy cycle (every rank calls it in the same cycles): `bytes` the
  // executor's running total, `seconds` this cycle's execution, `items` what
  // it ran. Every kCheckCycles it issues one collective. An error is a
  // transport failure.
  Status AfterBusyCycle(std::uint64_t bytes, double seconds,
                        const std::vector<planning::FusionItem>& items);
  // Distinct cycles remembered for SamePlan (more are not added).
  static constexpr std::size_t kMaxCyclesSeen = 16;

 private:
  Status Apply(const planning::TuningPoint& point);
  void Observe(const std::vector<planning::FusionItem>& items);
  void StartSearch();  // after warm-up
  void Log(int cycles, double seconds, double bytes);

  Communicator* comm_;
  Executor* executor_;
  double max_seconds_ = 0;
  double min_window_seconds_ = 0;
  int max_window_cycles_ = 0;
  bool enabled_ = false;
  planning::TunerOptions tuner_options_;
  std::unique_ptr<planning::Tuner> tuner_;  // made once the warm-up cycles were seen
  std::vector<std::vector<planning::FusionItem>> cycles_seen_;  // no error items
  std::FILE* log_ = nullptr;  // rank 0's CSV
  Clock::time_point started_{};  // the first busy cycle's; unset before it
  int cycles_ = 0;             // busy cycles in this window
  int unchecked_ = 0;          // busy cycles since the last check
  std::uint64_t window_start_bytes_ = 0;
  double window_seconds_ = 0;
  std::uint64_t windows_ = 0;  // measured (after warm-up)
  int warmup_left_ = kWarmupChecks;
};

}  // namespace tfmpi
