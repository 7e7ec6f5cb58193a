#include "small_tensors_case.h"

#include <fmt/format.h>

#include "engine_driver.h"
#include "timing.h"

namespace tfmpi::bench {

SmallTensorsResult RunSmallTensorsCase(const BenchContext& ctx) {
  const BenchOptions& o = ctx.options;
  TensorSet set;
  for (int i = 0; i < o.small_count; ++i)
    set.Add(fmt::format("small/{:05d}", i), {o.small_bytes / 4}, ReduceOp::kSum);

  MPI_Barrier(ctx.comm);
  std::unique_ptr<Engine> engine;
  Check(ctx, "starting the engine", StartMpiEngine(ctx.engine_options, &engine));
  IterationRunner runner;
  for (int i = 0; i < o.small_warmup; ++i)
    Check(ctx, "small-tensor warm-up iteration", runner.Run(engine.get(), &set));
  const auto count = static_cast<std::uint64_t>(o.small_count);
  const EngineStats a = SettledStats(*engine, count * static_cast<std::uint64_t>(o.small_warmup));
  std::vector<double> times;
  for (int i = 0; i < o.small_iters; ++i) {
    const auto t0 = BenchClock::now();
    Check(ctx, "small-tensor iteration", runner.Run(engine.get(), &set));
    times.push_back(SecondsSince(t0));
  }
  const EngineStats b =
      SettledStats(*engine, a.tensors + count * static_cast<std::uint64_t>(o.small_iters));
  engine->Shutdown();

  auto per = [](double x, std::uint64_t n) { return n ? x / static_cast<double>(n) : 0.0; };
  auto micros = [](std::vector<double> v) {
    for (double& x : v) x *= 1e6;
    return v;
  };
  const std::uint64_t cycles = b.cycles - a.cycles, busy = b.busy_cycles - a.busy_cycles;
  const auto busy_neg = GatherAll(
      per(b.busy_negotiation_seconds - a.busy_negotiation_seconds, busy), ctx.comm);
  const auto all_neg =
      GatherAll(per(b.negotiation_seconds - a.negotiation_seconds, cycles), ctx.comm);
  times = MaxOverRanks(times, ctx.comm);

  SmallTensorsResult res;
  res.iteration_seconds = Median(times);
  res.busy_negotiation_seconds = Max(busy_neg);
  res.busy_negotiation_min_seconds = Min(busy_neg);
  res.negotiation_seconds = Max(all_neg);
  if (ctx.rank != 0) return res;

  const auto iters = static_cast<std::uint64_t>(o.small_iters);

  fmt::print(
      "\n(c) {} tensors of {} B per iteration, steady state: {} timed iterations after {} "
      "warm-up\n"
      "  time per iteration: median {:.3f} ms, min {:.3f} ms, max {:.3f} ms (max over ranks)\n"
      "  per iteration (rank 0): {:.2f} cycles ({:.2f} busy), {:.1f} cache hits, {:.1f} "
      "collectives; {} full rounds in all\n",
      o.small_count, o.small_bytes, o.small_iters, o.small_warmup, res.iteration_seconds * 1e3,
      Min(times) * 1e3, Max(times) * 1e3, per(static_cast<double>(cycles), iters),
      per(static_cast<double>(busy), iters),
      per(static_cast<double>(b.cache_hits - a.cache_hits), iters),
      per(static_cast<double>(b.groups - a.groups), iters), b.full_rounds - a.full_rounds);
  if (static_cast<std::size_t>(o.small_count) > ctx.engine_options.cache_capacity)
    fmt::print("  note: {} tensors exceed TFMPI_CACHE_CAPACITY={}: not every tensor can be "
               "cached\n", o.small_count, ctx.engine_options.cache_capacity);
  fmt::print("  negotiation per busy cycle (us), by rank: {:.1f}\n"
             "    (max over ranks includes waiting for late ranks: Note [Negotiation skew])\n",
             fmt::join(micros(busy_neg), ", "));
  fmt::print("  negotiation per cycle, idle included (us), by rank: {:.1f}\n",
             fmt::join(micros(all_neg), ", "));
  return res;
}

}  // namespace tfmpi::bench
