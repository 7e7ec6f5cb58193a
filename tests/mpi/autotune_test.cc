// TFMPI_AUTOTUNE over real MPI (Note [Autotune]): while the search changes the
// MPI message size (chunking) and the fusion thresholds between cycles, every
// allreduce stays exact, the search ends within its window count, and every
// rank ends with the same settings.
#include "mpi_test_util.h"
#include "patterns.h"

namespace tfmpi::mpitest {
namespace {

// One step: float32 sums of several sizes enqueued together (the small ones
// fuse; the 300,000-element one crosses the direct thresholds the search
// tries and is chunked by the smaller message sizes) and one average.
void Step(MpiTest& t, int step) {
  const int K = t.size(), r = t.rank();
  Batch b;
  const std::int64_t sizes[] = {100, 7, 100, 40000, 300000};
  for (std::size_t i = 0; i < std::size(sizes); ++i) {
    const ReduceOp op = i == 1 ? ReduceOp::kAverage : ReduceOp::kSum;
    const DataType d = DataType::kFloat32;
    const std::string name = fmt::format("tune.grad{}", i);
    Tensor& in = b.NewTensor(d, {sizes[i]});
    in.Fill([&](std::int64_t j) { return ReduceInput(d, op, r, j + step, K); });
    b.Add(AllreduceRequest(name, op, in, &in), [&t, &in, d, op, K, step, name](const Status& s) {
      if (t.ExpectOk(s, name))
        t.ExpectTensor(in, [&](std::int64_t j) { return ReduceExpected(d, op, j + step, K); },
                       fmt::format("{} of step {}", name, step), ReduceTolerance(d, op));
    });
  }
  b.Run(t, /*all_at_once=*/true);
}

// Every rank's value of `v` is the same: its MIN and MAX over ranks agree.
void ExpectSameEverywhere(MpiTest& t, const std::string& what, double v) {
  Tensor lo(DataType::kFloat64, {1}), hi(DataType::kFloat64, {1});
  lo.Set(0, v);
  hi.Set(0, v);
  t.ExpectOk(t.Run(AllreduceRequest("tune.check.min." + what, ReduceOp::kMin, lo, &lo)), what);
  t.ExpectOk(t.Run(AllreduceRequest("tune.check.max." + what, ReduceOp::kMax, hi, &hi)), what);
  t.Expect(lo.Get(0) == v && hi.Get(0) == v, "{} differs between ranks: {} here, {}-{} in all",
           what, v, lo.Get(0), hi.Get(0));
}

}  // namespace
}  // namespace tfmpi::mpitest

int main() {
  using namespace tfmpi::mpitest;
  tfmpi::EngineOptions options;
  options.autotune.enabled = true;
  options.autotune.max_seconds = 3600;
  options.autotune.min_window_seconds = 0;  // windows of 5 busy cycles
  MpiTest t("autotune_test", options);
  // At most (6 + 4 + 3) x 3 + 6 windows of 5 busy cycles after two checks
  // of warm-up: 235 busy cycles; each step is at least one.
  constexpr int kSteps = 260;
  for (int step = 0; step < kSteps; ++step) Step(t, step);
  const tfmpi::EngineStats s = t.SettledStats();
  t.Expect(s.autotune.enabled && s.autotune.done, "the search did not end in {} steps ({} windows)",
           kSteps, s.autotune.windows);
  // Candidates that run the same calls as their baseline are not measured;
  // the message sizes chunk the 300,000-element tensor differently, so at
  // least the baseline and two of them are.
  t.Expect(s.autotune.windows >= 9 && s.autotune.windows <= 45, "{} windows, expected 9-45",
           s.autotune.windows);
  t.Note(fmt::format("autotune ended with {} after {} windows",
                     tfmpi::planning::Describe(s.autotune.current), s.autotune.windows));
  ExpectSameEverywhere(t, "windows", static_cast<double>(s.autotune.windows));
  ExpectSameEverywhere(t, "message_elements", static_cast<double>(s.autotune.current.message_elements));
  ExpectSameEverywhere(t, "direct_threshold", static_cast<double>(s.autotune.current.direct_threshold));
  ExpectSameEverywhere(t, "fusion_threshold", static_cast<double>(s.autotune.current.fusion_threshold));
  // The settings in use after the search still give exact results.
  for (int step = 0; step < 5; ++step) Step(t, kSteps + step);
  return t.Finish();
}
