#include "tfmpi/engine/options.h"

#include <algorithm>
#include <map>

namespace tfmpi {

const ParamRegistry& EngineParams() {
  static const ParamRegistry registry({
      {"TFMPI_FUSION_THRESHOLD", ParamType::kBytes, "64M", 0, 1099511627776.0, {},
       "Fusion buffer size: small tensors ready in one cycle are packed into buffers of at "
       "most this many bytes, one collective per buffer. 0 disables fusion.",
       {}},
      {"TFMPI_DIRECT_THRESHOLD", ParamType::kBytes, "1M", 0, 1099511627776.0, {},
       "Tensors of at least this many bytes skip the fusion buffer and are reduced in place "
       "in the caller's memory (no copies).",
       {}},
      {"TFMPI_CYCLE_TIME_MS", ParamType::kDouble, "5", 0, 1000, {},
       "Background negotiation cycle period in milliseconds, for ranks with nothing waiting "
       "(a new request, or one still waiting for a peer, starts a cycle at once). While no "
       "rank has anything pending, cycles lengthen to up to 8 times this.",
       {}},
      {"TFMPI_CACHE_CAPACITY", ParamType::kInt, "1024", 0, 1048576, {},
       "Response cache entries (tensors negotiated with one bit each in steady state). "
       "0 disables the cache.",
       {}},
      {"TFMPI_TIMELINE", ParamType::kString, "", 0, 0, {},
       "Path of a Chrome-trace JSON timeline written by rank 0 (open in Perfetto). Empty: off.",
       {}},
      {"TFMPI_STALL_WARNING_SECONDS", ParamType::kDouble, "60", 0, 86400, {},
       "Warn (on rank 0) about tensors some ranks submitted and others did not for this "
       "long, naming the missing ranks. 0 disables.",
       {}},
      {"TFMPI_STALL_TIMEOUT_SECONDS", ParamType::kDouble, "10", 0, 86400, {},
       "When every rank has waited this long for collectives the others never submit (a "
       "deadlock: the ranks' sequences diverged), fail those collectives with an error "
       "naming the missing ranks. A rank that is only slow (nothing submitted that the "
       "others lack) never triggers it. 0 waits forever.",
       {}},
      {"TFMPI_PEER_TIMEOUT_SECONDS", ParamType::kDouble, "45", 0, 86400, {},
       "A rank that hears nothing from a neighbour rank for this long (it was killed, frozen "
       "or cut off from the network) names it and host, fails its collectives and exits "
       "within 5 s more; mpirun then ends the job. Half of it without a reply prints a "
       "warning. tfmpirun also has Open MPI give up an unreachable host after 0.6 times this. "
       "0 disables the heartbeats.",
       {}},
      {"TFMPI_MAX_MESSAGE_ELEMENTS", ParamType::kInt, "0", 0, 2147483647, {},
       "Largest element count in one MPI call; larger tensors and fused buffers are split "
       "into chunks. 0: max(262144, 131072 x ranks), Note [Message size].", {}},
      {"TFMPI_AUTOTUNE", ParamType::kBool, "0", 0, 0, {},
       "Search the message size, direct threshold and fusion threshold during the first "
       "steps (each setting in turn, 3 windows of 5-50 busy cycles per value, timed on "
       "the slowest rank) and keep the fastest; settings set in the environment are not "
       "tuned, and the defaults stay unless a confirmation run measures the new settings "
       "faster (Note [Autotune]). Must be the same on every rank (tfmpirun passes it).",
       {}},
      {"TFMPI_AUTOTUNE_LOG", ParamType::kString, "", 0, 0, {},
       "With TFMPI_AUTOTUNE: a CSV file that rank 0 writes, one row per measured window "
       "(settings, seconds, bytes). Empty: none.",
       {}},
      {"TFMPI_AUTOTUNE_SECONDS", ParamType::kDouble, "120", 1, 86400, {},
       "With TFMPI_AUTOTUNE: the search stops after this many seconds of training (the "
       "longest of any rank) and keeps the defaults unless its confirmation already ended.",
       {}},
      {"TFMPI_SKIP_DATA", ParamType::kBool, "0", 0, 0, {},
       "Diagnostic: allreduces are negotiated but move no data (each rank keeps its own "
       "values, so training is wrong); the step time with it, against without, is the "
       "communication a step exposes. Not with TFMPI_AUTOTUNE.",
       {}},
      {"TFMPI_LOG_LEVEL", ParamType::kChoice, "warning", 0, 0,
       {"trace", "debug", "info", "warning", "error", "off"},
       "Engine log level; messages go to stderr tagged with the rank.", {}},
  });
  return registry;
}

std::size_t MessageElementsFor(std::size_t configured, int world_size) {
  if (configured > 0) return configured;
  constexpr std::size_t kFloor = 262144, kPerRank = 131072, kMax = 2147483647;
  const std::size_t n = world_size > 0 ? static_cast<std::size_t>(world_size) : 1;
  return std::min(kMax, std::max(kFloor, kPerRank * n));
}

Status ResolveEngineOptions(const EnvLookup& lookup, EngineOptions* out) {
  std::map<std::string, ParamValue> v;
  TFMPI_RETURN_IF_ERROR(EngineParams().Resolve(lookup, &v));
  out->fusion_threshold = static_cast<std::size_t>(v["TFMPI_FUSION_THRESHOLD"].i);
  out->direct_threshold = static_cast<std::size_t>(v["TFMPI_DIRECT_THRESHOLD"].i);
  out->cycle_time_ms = v["TFMPI_CYCLE_TIME_MS"].d;
  out->cache_capacity = static_cast<std::size_t>(v["TFMPI_CACHE_CAPACITY"].i);
  out->timeline_path = v["TFMPI_TIMELINE"].s;
  out->stall_warning_seconds = v["TFMPI_STALL_WARNING_SECONDS"].d;
  out->stall_timeout_seconds = v["TFMPI_STALL_TIMEOUT_SECONDS"].d;
  out->peer_timeout_seconds = v["TFMPI_PEER_TIMEOUT_SECONDS"].d;
  out->max_message_elements = static_cast<std::size_t>(v["TFMPI_MAX_MESSAGE_ELEMENTS"].i);
  out->log_level = *ParseLogLevel(v["TFMPI_LOG_LEVEL"].s);
  out->autotune.enabled = v["TFMPI_AUTOTUNE"].b;
  out->autotune.log_path = v["TFMPI_AUTOTUNE_LOG"].s;
  out->autotune.max_seconds = v["TFMPI_AUTOTUNE_SECONDS"].d;
  out->autotune.fixed_message = out->max_message_elements != 0;
  out->autotune.fixed_direct = v["TFMPI_DIRECT_THRESHOLD"].from_environment;
  out->autotune.fixed_fusion = v["TFMPI_FUSION_THRESHOLD"].from_environment;
  out->skip_data = v["TFMPI_SKIP_DATA"].b;
  if (out->skip_data && out->autotune.enabled)
    return Status::InvalidArgument(
        "TFMPI_SKIP_DATA and TFMPI_AUTOTUNE cannot be combined: the search agrees on its "
        "measurements through an allreduce, which TFMPI_SKIP_DATA turns into a no-op");
  return Status::Ok();
}

}  // namespace tfmpi
