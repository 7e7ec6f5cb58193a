#include "large_set_case.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine_driver.h"
#include "resnet50_shapes.h"
#include "timing.h"

namespace tfmpi::bench {
namespace {

struct StatsDelta {
  double cycles = 0, busy_cycles = 0, full_rounds = 0, groups = 0, fused_groups = 0,
         tensors = 0;
  void Add(const EngineStats& before, const EngineStats& after) {
    cycles += static_cast<double>(after.cycles - before.cycles);
    busy_cycles += static_cast<double>(after.busy_cycles - before.busy_cycles);
    full_rounds += static_cast<double>(after.full_rounds - before.full_rounds);
    groups += static_cast<double>(after.groups - before.groups);
    fused_groups += static_cast<double>(after.fused_groups - before.fused_groups);
    tensors += static_cast<double>(after.tensors - before.tensors);
  }
};

class LargeSetBench {
 public:
  explicit LargeSetBench(const BenchContext& ctx) : ctx_(ctx) {
    ResNet50Config config;
    config.conv_bias = ctx.options.conv_bias;
    const auto vars = TrainableOnly(ResNet50Variables(config));
    // Backpropagation produces gradients from the classifier back to the stem.
    for (auto it = vars.rbegin(); it != vars.rend(); ++it)
      set_.Add(it->name, it->shape, ctx.options.op);
    raw_.assign(set_.bytes() / sizeof(float), 0.0f);
  }

  const TensorSet& set() const { return set_; }

  void EngineBlock(int iters, std::vector<double>* times) {
    MPI_Barrier(ctx_.comm);
    std::unique_ptr<Engine> engine;
    Check(ctx_, "starting the engine", StartMpiEngine(ctx_.engine_options, &engine));
    for (int i = 0; i < ctx_.options.warmup; ++i) {
      if (!engine_checked_) set_.Fill(static_cast<float>(ctx_.rank + 1));
      Check(ctx_, "engine warm-up iteration", runner_.Run(engine.get(), &set_));
      if (!engine_checked_) {
        VerifyAndClear(set_.AllClose(Expected(ctx_.options.op)), "engine");
        engine_checked_ = true;
      }
    }
    const std::uint64_t n = set_.metas.size();
    const EngineStats before =
        SettledStats(*engine, n * static_cast<std::uint64_t>(ctx_.options.warmup));
    for (int i = 0; i < iters; ++i) {
      const auto t0 = BenchClock::now();
      Check(ctx_, "engine iteration", runner_.Run(engine.get(), &set_));
      times->push_back(SecondsSince(t0));
    }
    delta_.Add(before,
               SettledStats(*engine, before.tensors + n * static_cast<std::uint64_t>(iters)));
    engine->Shutdown();
  }

  void RawBlock(int iters, std::vector<double>* times) {
    MPI_Barrier(ctx_.comm);
    for (int i = 0; i < ctx_.options.warmup; ++i) {
      if (!raw_checked_) std::fill(raw_.begin(), raw_.end(), static_cast<float>(ctx_.rank + 1));
      RawAllreduce();
      if (!raw_checked_) {
        const float want = Expected(ReduceOp::kSum);
        VerifyAndClear(std::all_of(raw_.begin(), raw_.end(), [&](float x) { return x == want; }),
                       "raw MPI");
        raw_checked_ = true;
      }
    }
    for (int i = 0; i < iters; ++i) {
      const auto t0 = BenchClock::now();
      RawAllreduce();
      times->push_back(SecondsSince(t0));
    }
  }

  const StatsDelta& delta() const { return delta_; }

 private:
  void RawAllreduce() {
    const std::size_t chunk = ctx_.options.raw_chunk_bytes > 0
                                  ? static_cast<std::size_t>(ctx_.options.raw_chunk_bytes) / 4
                                  : raw_.size();
    for (std::size_t off = 0; off < raw_.size(); off += chunk) {
      const int n = static_cast<int>(std::min(chunk, raw_.size() - off));
      const int rc =
          MPI_Allreduce(MPI_IN_PLACE, raw_.data() + off, n, MPI_FLOAT, MPI_SUM, ctx_.comm);
      if (rc != MPI_SUCCESS) Fail(ctx_, "raw MPI_Allreduce", Status::Internal("MPI error"));
    }
  }

  float Expected(ReduceOp op) const {
    const float sum = static_cast<float>(ctx_.size * (ctx_.size + 1) / 2);
    return op == ReduceOp::kAverage ? sum / static_cast<float>(ctx_.size) : sum;
  }

  // The first warm-up checks the result (rank r contributes r + 1), then the
  // buffers are zeroed: timed iterations reduce zeros, which never overflow.
  void VerifyAndClear(bool ok, const char* side) {
    if (!ok)
      Fail(ctx_, fmt::format("{} allreduce of the ResNet-50 set", side),
           Status::Internal("wrong result (expected every element to be the reduced rank+1)"));
    set_.Fill(0.0f);
    std::fill(raw_.begin(), raw_.end(), 0.0f);
  }

  const BenchContext& ctx_;
  TensorSet set_;
  std::vector<float> raw_;
  IterationRunner runner_;
  StatsDelta delta_;
  bool engine_checked_ = false, raw_checked_ = false;
};

}  // namespace

LargeSetResult RunLargeSetCase(const BenchContext& ctx) {
  const BenchOptions& o = ctx.options;
  LargeSetBench bench(ctx);
  const TensorSet& set = bench.set();

  std::vector<double> engine_times, raw_times;
  std::vector<std::size_t> block_end;  // per round: end index into both vectors
  for (int done = 0, round = 0; done < o.iters; ++round) {
    const int k = std::min(o.block, o.iters - done);
    if (round % 2 == 0) {
      bench.EngineBlock(k, &engine_times);
      bench.RawBlock(k, &raw_times);
    } else {
      bench.RawBlock(k, &raw_times);
      bench.EngineBlock(k, &engine_times);
    }
    done += k;
    block_end.push_back(static_cast<std::size_t>(done));
  }
  engine_times = MaxOverRanks(engine_times, ctx.comm);
  raw_times = MaxOverRanks(raw_times, ctx.comm);

  std::vector<double> paired;  // per round: raw median / engine median
  for (std::size_t r = 0, begin = 0; r < block_end.size(); begin = block_end[r++]) {
    const auto b = static_cast<std::ptrdiff_t>(begin);
    const auto e = static_cast<std::ptrdiff_t>(block_end[r]);
    paired.push_back(Median({raw_times.begin() + b, raw_times.begin() + e}) /
                     Median({engine_times.begin() + b, engine_times.begin() + e}));
  }

  LargeSetResult res;
  res.tensors = static_cast<int>(set.metas.size());
  res.bytes = set.bytes();
  res.engine_seconds = Median(engine_times);
  res.raw_seconds = Median(raw_times);
  res.ratio = res.raw_seconds / res.engine_seconds;
  if (ctx.rank != 0) return res;

  const double n = o.iters;
  const StatsDelta& d = bench.delta();
  const double engine_alg = AlgBandwidthGBps(res.bytes, res.engine_seconds);
  const double raw_alg = AlgBandwidthGBps(res.bytes, res.raw_seconds);
  fmt::print(
      "\n(a)/(b) ResNet-50 gradient set: {} tensors, {:.2f} M float32 values ({:.2f} MB); "
      "engine op {}, raw MPI op sum{}\n"
      "  {} timed iterations per side in blocks of {} ({} warm-up per block), alternating\n"
      "  engine, per timed iteration (rank 0): {:.1f} collectives ({:.1f} fused groups, "
      "{:.1f} single-tensor), {:.1f} cycles ({:.1f} busy), {:.0f} full rounds in all\n",
      res.tensors, res.bytes / sizeof(float) / 1e6, res.bytes / 1e6, ReduceOpName(o.op),
      o.raw_chunk_bytes ? fmt::format(" in chunks of {} B", o.raw_chunk_bytes) : "", o.iters,
      o.block, o.warmup, d.groups / n, d.fused_groups / n, (d.groups - d.fused_groups) / n,
      d.cycles / n, d.busy_cycles / n, d.full_rounds);
  fmt::print("  {:<14} {:>10} {:>10} {:>10} {:>12} {:>12}\n", "", "median ms", "min ms", "max ms",
             "algbw GB/s", "busbw GB/s");
  auto row = [&](const char* label, const std::vector<double>& t, double alg) {
    fmt::print("  {:<14} {:>10.2f} {:>10.2f} {:>10.2f} {:>12.2f} {:>12.2f}\n", label,
               Median(t) * 1e3, Min(t) * 1e3, Max(t) * 1e3, alg, BusBandwidthGBps(alg, ctx.size));
  };
  row("engine (a)", engine_times, engine_alg);
  row("raw MPI (b)", raw_times, raw_alg);
  fmt::print("  engine/raw bandwidth ratio: {:.3f} (medians); per-round paired: median {:.3f}, "
             "range [{:.3f}, {:.3f}] over {} rounds\n",
             res.ratio, Median(paired), Min(paired), Max(paired), paired.size());
  return res;
}

}  // namespace tfmpi::bench
