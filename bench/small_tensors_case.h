// Case (c): many small tensors per iteration, measured in steady state (after
// warm-up every tensor is in the response cache, so negotiation is one
// bitwise-AND allreduce per cycle; see Note [Negotiation protocol]). Reports
// time per iteration and the engine's own negotiation time per cycle.
#pragma once

#include "bench_context.h"

namespace tfmpi::bench {

// Note [Negotiation skew]
// EngineStats' negotiation time runs from the start of a cycle to the
// decision, so it includes waiting inside the bitwise-AND allreduce for
// ranks whose cycle started later. Each rank's cycle timer runs on its own
// clock, so a phase offset between ranks persists from cycle to cycle and the
// rank that leads pays it every cycle. The minimum over ranks (the rank that
// arrives last and does not wait) is the cost of negotiation itself; the
// maximum is what the slowest rank's engine reports.
struct SmallTensorsResult {
  double iteration_seconds = 0;             // median, max over ranks
  double busy_negotiation_seconds = 0;      // per busy cycle, max over ranks
  double busy_negotiation_min_seconds = 0;  // per busy cycle, min over ranks
  double negotiation_seconds = 0;           // per cycle (idle ones too), max over ranks
};

SmallTensorsResult RunSmallTensorsCase(const BenchContext& ctx);

}  // namespace tfmpi::bench
