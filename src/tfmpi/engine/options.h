// EngineOptions and the TFMPI_* parameters that fill them.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tfmpi/common/logging.h"
#include "tfmpi/common/params.h"

namespace tfmpi {

// TFMPI_AUTOTUNE and its companions (Note [Autotune], planning/autotune.h).
struct AutotuneOptions {
  bool enabled = false;
  std::string log_path;      // rank 0 writes one CSV row per window; empty: none
  double max_seconds = 120;  // the search stops after this long, keeping its best
  // A window closes at a multiple of 5 busy cycles once the slowest rank spent
  // min_window_seconds executing in it, or after max_window_cycles busy cycles
  // (Note [Autotune windows], engine/autotune_session.h).
  double min_window_seconds = 0.02;
  int max_window_cycles = 50;
  // Settings the user chose (set in the environment) are not tuned.
  bool fixed_message = false, fixed_direct = false, fixed_fusion = false;
};

struct EngineOptions {
  std::size_t fusion_threshold = 64u << 20;
  std::size_t direct_threshold = 1u << 20;
  double cycle_time_ms = 5.0;  // Note [Idle cycles], engine_loop.cc
  std::size_t cache_capacity = 1024;
  std::string timeline_path;
  double stall_warning_seconds = 60;
  double stall_timeout_seconds = 10;  // Note [Deadlock]
  double peer_timeout_seconds = 45;   // Note [Lost peers]
  std::size_t max_message_elements = 0;  // 0: MessageElementsFor picks (Note [Message size])
  LogLevel log_level = LogLevel::kWarning;
  AutotuneOptions autotune;
  bool skip_data = false;  // diagnostic: Note [Skipping the data], runtime/mpi_factory.cc
  // The caller's settings (transparent mode's) that every rank must share,
  // checked at start with the engine's own (engine/shared_settings.h).
  std::vector<std::pair<std::string, std::string>> caller_settings;
  // Where rank 0 writes the list of the settings that differ, before the
  // other ranks are released (Note [Reported before released]); empty: a
  // "tfmpi: " line each, in one write to stderr.
  std::function<void(const std::string&)> report_settings;
};

// The registry of every TFMPI_* knob the engine reads.
const ParamRegistry& EngineParams();

// Resolves every parameter through `lookup` (normally the environment).
Status ResolveEngineOptions(const EnvLookup& lookup, EngineOptions* out);

// Note [Message size]
// Big tensors and fused buffers go to MPI in chunks of at most this many
// elements. One huge MPI_Allreduce was slower than 1 MiB pieces on shared
// memory (docs/performance.md, "How big an MPI call": 9-14% of the step of a
// 42 M parameter model at -np 2), but pieces must not get so small that
// latency dominates on a network: a ring allreduce of S bytes over N ranks
// moves 2(N-1) segments of S/N bytes, so its efficiency against one unchunked
// call is about 1 / (1 + N alpha beta / S) (alpha the latency, beta the
// bandwidth). With alpha = 5 us and beta = 12.5 GB/s (100 Gbit/s), S >=
// 512 KiB x N keeps it near 90%. Hence the default: max(262144, 131072 x N)
// float32 elements, i.e. max(1 MiB, 512 KiB x N). A value the user sets wins.
std::size_t MessageElementsFor(std::size_t configured, int world_size);

}  // namespace tfmpi
