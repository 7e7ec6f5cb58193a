// Note [Compute benchmark]
// A single-threaded float multiply-add kernel (64x64 matrix products, in
// cache) run for a fixed wall-clock time. Throughput is work done divided by
// *wall* time, not CPU time: a cgroup quota of 25% lets the process run 25 ms
// of every 100 ms period, and a busy host shares the core with others, so
// both show up as lower throughput, which is what a rank would get there. The
// run spans several 100 ms periods (default 0.5 s) so that the first period's
// burst does not dominate. The figure is a relative speed, not a peak rate:
// TensorFlow's kernels are faster, but slower hosts are slower for both.
#include <chrono>

#include "tfmpi/probe/node_probe.h"

namespace tfmpi::probe {

namespace {

constexpr int kN = 64;

// C += A * B; returns the floating-point operations done.
double MultiplyAdd(const float* a, const float* b, float* c) {
  for (int i = 0; i < kN; ++i) {
    for (int k = 0; k < kN; ++k) {
      const float aik = a[i * kN + k];
      for (int j = 0; j < kN; ++j) c[i * kN + j] += aik * b[k * kN + j];
    }
  }
  return 2.0 * kN * kN * kN;
}

}  // namespace

void RunComputeBenchmark(double seconds, NodeReport* report) {
  using Clock = std::chrono::steady_clock;
  static float a[kN * kN], b[kN * kN], c[kN * kN];
  for (int i = 0; i < kN * kN; ++i) {
    a[i] = 1.0f / static_cast<float>(i + 1);
    b[i] = 0.5f;
    c[i] = 0.0f;
  }
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  double flops = 0;
  auto now = start;
  while (now < end) {
    for (int rep = 0; rep < 4; ++rep) flops += MultiplyAdd(a, b, c);
    c[0] *= 0.5f;  // keeps values bounded and the work observable
    now = Clock::now();
  }
  const double elapsed = std::chrono::duration<double>(now - start).count();
  volatile float sink = c[kN];  // the result is used: the loop cannot be dropped
  (void)sink;
  report->bench_seconds = elapsed;
  report->bench_gflops = elapsed > 0 ? flops / elapsed / 1e9 : 0;
}

}  // namespace tfmpi::probe
