// tfmpi_allreduce_bench: the engine against raw MPI on a realistic gradient
// set, and the engine's steady-state negotiation cost. See --help and
// docs/performance.md.
#include <mpi.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "bench_context.h"
#include "large_set_case.h"
#include "resnet50_shapes.h"
#include "small_tensors_case.h"
#include "timing.h"

namespace tfmpi::bench {

void Fail(const BenchContext& ctx, const std::string& what, const Status& status) {
  std::fprintf(stderr, "[rank %d] tfmpi_allreduce_bench: %s failed: %s\n", ctx.rank, what.c_str(),
               status.ToString().c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

namespace {

std::string Grouped(std::int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "0.52 0.61 0.40": the host's 1, 5 and 15 minute load averages (noise context).
std::string LoadAverage() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return "unknown";
  double a = 0, b = 0, c = 0;
  const int n = std::fscanf(f, "%lf %lf %lf", &a, &b, &c);
  std::fclose(f);
  return n == 3 ? fmt::format("{:.2f} {:.2f} {:.2f}", a, b, c) : "unknown";
}

std::string MpiLibrary() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string v(version, static_cast<std::size_t>(len));
  return v.substr(0, v.find_first_of(",\n"));
}

// What the gradient set is made of, checked against Keras' own totals.
void DescribeModel(const BenchOptions& o) {
  ResNet50Config config;
  config.conv_bias = o.conv_bias;
  const auto all = ResNet50Variables(config);
  const auto trainable = TrainableOnly(all);
  int kernels = 0, biases = 0, bn = 0, dense = 0;
  for (const ModelVariable& v : trainable) {
    if (EndsWith(v.name, "_conv/kernel")) ++kernels;
    else if (EndsWith(v.name, "_conv/bias")) ++biases;
    else if (EndsWith(v.name, "_bn/gamma") || EndsWith(v.name, "_bn/beta")) ++bn;
    else ++dense;
  }
  fmt::print("ResNet-50 ({} layout): {} trainable tensors = {} conv kernels + {} conv biases + "
             "{} BatchNorm gamma/beta + {} dense kernel/bias\n",
             o.conv_bias ? "Keras" : "torchvision", trainable.size(), kernels, biases, bn, dense);
  fmt::print("  {} trainable float32 values ({:.2f} MB); with BatchNorm moving statistics {} in "
             "all",
             Grouped(TotalElements(trainable)), TotalElements(trainable) * 4 / 1e6,
             Grouped(TotalElements(all)));
  if (o.conv_bias)
    fmt::print(" (Keras ResNet50: {} / {} trainable: {})",
               Grouped(kKerasResNet50Params), Grouped(kKerasResNet50TrainableParams),
               TotalElements(all) == kKerasResNet50Params &&
                       TotalElements(trainable) == kKerasResNet50TrainableParams
                   ? "match"
                   : "MISMATCH");
  fmt::print("\n");
}

void ListShapes(const BenchOptions& o) {
  ResNet50Config config;
  config.conv_bias = o.conv_bias;
  for (const ModelVariable& v : TrainableOnly(ResNet50Variables(config)))
    fmt::print("{:<36} {:<20} {:>10}\n", v.name, ShapeToString(v.shape),
               Grouped(NumElements(v.shape)));
}

int Main(int argc, char** argv) {
  BenchContext ctx;
  MPI_Comm_dup(MPI_COMM_WORLD, &ctx.comm);
  MPI_Comm_rank(ctx.comm, &ctx.rank);
  MPI_Comm_size(ctx.comm, &ctx.size);

  Status parsed = ParseBenchOptions(argc, argv, &ctx.options);
  if (!parsed.ok() || ctx.options.help) {
    if (ctx.rank == 0) {
      if (parsed.ok()) std::fputs(BenchUsage(argv[0]).c_str(), stdout);
      else std::fprintf(stderr, "tfmpi_allreduce_bench: %s\n", parsed.message().c_str());
    }
    return parsed.ok() ? 0 : 2;
  }
  const BenchOptions& o = ctx.options;
  if (o.list_shapes) {
    if (ctx.rank == 0) ListShapes(o);
    return 0;
  }
  Check(ctx, "reading TFMPI_* options",
        ResolveEngineOptions(
            [](const std::string& name) -> std::optional<std::string> {
              const char* v = std::getenv(name.c_str());
              return v ? std::optional<std::string>(v) : std::nullopt;
            },
            &ctx.engine_options));

  const EngineOptions& e = ctx.engine_options;
  if (ctx.rank == 0) {
    fmt::print("tfmpi_allreduce_bench: {} ranks, {}; load average {}\n", ctx.size, MpiLibrary(),
               LoadAverage());
    fmt::print("engine options (TFMPI_* environment): direct threshold {} B, fusion threshold {} "
               "B, cycle {} ms, cache capacity {}\n",
               Grouped(static_cast<std::int64_t>(e.direct_threshold)),
               Grouped(static_cast<std::int64_t>(e.fusion_threshold)), e.cycle_time_ms,
               e.cache_capacity);
    DescribeModel(o);
    std::fflush(stdout);
  }

  LargeSetResult large;
  SmallTensorsResult small;
  if (o.large) large = RunLargeSetCase(ctx);
  if (o.small) small = RunSmallTensorsCase(ctx);

  if (ctx.rank == 0) {
    fmt::print("\nload average at the end: {}\n", LoadAverage());
    fmt::print("SUMMARY np={}", ctx.size);
    if (o.large) {
      const double ea = AlgBandwidthGBps(large.bytes, large.engine_seconds);
      const double ra = AlgBandwidthGBps(large.bytes, large.raw_seconds);
      fmt::print(" ratio={:.3f} engine_ms={:.2f} raw_ms={:.2f} engine_algbw={:.2f} "
                 "engine_busbw={:.2f} raw_algbw={:.2f} raw_busbw={:.2f}",
                 large.ratio, large.engine_seconds * 1e3, large.raw_seconds * 1e3, ea,
                 BusBandwidthGBps(ea, ctx.size), ra, BusBandwidthGBps(ra, ctx.size));
    }
    if (o.small)
      fmt::print(" small_iter_ms={:.3f} neg_busy_us={:.1f} neg_busy_min_us={:.1f} "
                 "neg_all_us={:.1f}",
                 small.iteration_seconds * 1e3, small.busy_negotiation_seconds * 1e6,
                 small.busy_negotiation_min_seconds * 1e6, small.negotiation_seconds * 1e6);
    fmt::print("\n");
    fmt::print("targets (set for -np 2; this run has -np {}):\n", ctx.size);
    if (o.large)
      fmt::print("  engine/raw >= 0.95 on the ResNet-50 set: {} ({:.3f})\n",
                 large.ratio >= 0.95 ? "met" : "MISSED", large.ratio);
    if (o.small)
      fmt::print("  negotiation <= 100 us per busy cycle in steady state: {} ({:.1f} us on the "
                 "slowest rank; {:.1f} us on the fastest)\n",
                 small.busy_negotiation_seconds <= 100e-6 ? "met" : "MISSED",
                 small.busy_negotiation_seconds * 1e6, small.busy_negotiation_min_seconds * 1e6);
    std::fflush(stdout);
  }
  MPI_Comm_free(&ctx.comm);
  return 0;
}

}  // namespace
}  // namespace tfmpi::bench

int main(int argc, char** argv) {
  // The benchmark owns MPI so that engines can start and stop between blocks
  // (an engine finalises MPI only if it initialised it) and so raw MPI calls
  // can run on this thread.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_SERIALIZED) {
    std::fprintf(stderr, "tfmpi_allreduce_bench: MPI provides thread level %d; the engine needs "
                         "at least MPI_THREAD_SERIALIZED\n", provided);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const int rc = tfmpi::bench::Main(argc, argv);
  MPI_Finalize();
  return rc;
}
