#include "bench_options.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string_view>

namespace tfmpi::bench {
namespace {

Status ParsePositive(std::string_view flag, const char* text, int* out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > 100'000'000)
    return Status::InvalidArgument(
        fmt::format("{} needs a positive integer, got '{}' (see --help)", flag, text));
  *out = static_cast<int>(v);
  return Status::Ok();
}

}  // namespace

std::string BenchUsage(const char* program) {
  return fmt::format(
      "Usage: mpirun -np N {} [flags]\n"
      "\n"
      "Times tfmpi's engine against raw MPI in one run:\n"
      "  (a) the engine allreducing the ResNet-50 (Keras) trainable gradient set, one\n"
      "      request per tensor, all waited for, each iteration;\n"
      "  (b) one MPI_Allreduce(MPI_IN_PLACE, sum, float32) of the same total bytes;\n"
      "      (a) and (b) alternate in blocks, each block on a fresh engine (so (b) runs\n"
      "      with no engine thread alive);\n"
      "  (c) many small tensors in steady state: time per iteration and negotiation\n"
      "      cost per cycle (EngineStats).\n"
      "Engine options come from the TFMPI_* environment (e.g. TFMPI_DIRECT_THRESHOLD).\n"
      "\n"
      "Flags:\n"
      "  --iters N            timed iterations per side for (a)/(b) (default 20)\n"
      "  --block N            iterations per interleaved block (default 5)\n"
      "  --warmup N           untimed iterations at the start of each block (default 2)\n"
      "  --op sum|average     the engine's reduce op for (a) (default sum; (b) always sums)\n"
      "  --raw-chunk-bytes N  split the raw baseline (b) into MPI_Allreduce calls of N\n"
      "                       bytes (default 0: one call over everything)\n"
      "  --no-conv-bias       drop conv biases (torchvision layout, 161 tensors)\n"
      "  --small-count N      tensors per iteration in (c) (default 1000)\n"
      "  --small-bytes N      bytes per tensor in (c), a multiple of 4 (default 1024)\n"
      "  --small-iters N      timed iterations in (c) (default 200)\n"
      "  --small-warmup N     untimed iterations before (c) is measured (default 20)\n"
      "  --only-large         run (a)/(b) only\n"
      "  --only-small         run (c) only\n"
      "  --list-shapes        print the gradient tensors and exit\n"
      "  --help               this text\n",
      program);
}

Status ParseBenchOptions(int argc, char** argv, BenchOptions* out) {
  BenchOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    auto value = [&](const char** v) -> Status {
      if (i + 1 >= argc)
        return Status::InvalidArgument(fmt::format("{} needs a value (see --help)", flag));
      *v = argv[++i];
      return Status::Ok();
    };
    const char* v = nullptr;
    if (flag == "--help" || flag == "-h") {
      o.help = true;
    } else if (flag == "--iters") {
      TFMPI_RETURN_IF_ERROR(value(&v));
      TFMPI_RETURN_IF_ERROR(ParsePositive(flag, v, &o.iters));
    } else if (flag == "--block") {
      TFMPI_RETURN_IF_ERROR(value(&v));
      TFMPI_RETURN_IF_ERROR(ParsePositive(flag, v, &o.block));
    } else if (flag == "--warmup") {
      TFMPI_RETURN_IF_ERROR(value(&v));
      TFMPI_RETURN_IF_ERROR(ParsePositive(flag, v, &o.warmup));
    } else if (flag == "--op") {
      TFMPI_RETURN_IF_ERROR(value(&v));
      if (std::string_view(v) == "sum") o.op = ReduceOp::kSum;
      else if (std::string_view(v) == "average") o.op = ReduceOp::kAverage;
      else return Status::InvalidArgument(fmt::format("--op takes sum or average, got '{}'", v));
    } else if (flag == "--raw-chunk-bytes") {
      TFMPI_RETURN_IF_ERROR(value(&v));
      char* end = nullptr;
      o.raw_chunk_bytes = std::strtoll(v, &end, 10);
      if (end == v || *end != '\0' || o.raw_chunk_bytes < 0 || o.raw_chunk_bytes % 4 != 0)
        return Status::InvalidArgument(fmt::format(
            "--raw-chunk-bytes needs a non-negative multiple of 4, got '{}'", v));
    } else if (flag == "--no-conv-bias") {
      o.conv_bias = false;
    } else if (flag == "--small-count") {
      TFMPI_RETURN_IF_ERROR(value(&v));
      TFMPI_RETURN_IF_ERROR(ParsePositive(flag, v, &o.small_count));
    } else if (flag == "--small-bytes") {
      TFMPI_RETURN_IF_ERROR(value(&v));
      TFMPI_RETURN_IF_ERROR(ParsePositive(flag, v, &o.small_bytes));
      if (o.small_bytes % 4 != 0)
        return Status::InvalidArgument(
            fmt::format("--small-bytes must be a multiple of 4 (float32), got {}", v));
    } else if (flag == "--small-iters") {
      TFMPI_RETURN_IF_ERROR(value(&v));
      TFMPI_RETURN_IF_ERROR(ParsePositive(flag, v, &o.small_iters));
    } else if (flag == "--small-warmup") {
      TFMPI_RETURN_IF_ERROR(value(&v));
      TFMPI_RETURN_IF_ERROR(ParsePositive(flag, v, &o.small_warmup));
    } else if (flag == "--only-large") {
      o.small = false;
    } else if (flag == "--only-small") {
      o.large = false;
    } else if (flag == "--list-shapes") {
      o.list_shapes = true;
    } else {
      return Status::InvalidArgument(fmt::format("unknown flag '{}' (see --help)", flag));
    }
  }
  if (!o.large && !o.small)
    return Status::InvalidArgument("--only-large and --only-small exclude each other");
  *out = o;
  return Status::Ok();
}

}  // namespace tfmpi::bench
