// TFMPI_AUTOTUNE in the whole engine (Note [Autotune]): while the search
// changes the fusion settings between cycles, every result stays exact, and
// every rank ends with the same settings.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <memory>
#include <vector>

#include "engine_ranks.h"

namespace tfmpi {
namespace {

using testing::Await;
using testing::DeadlineIn;
using testing::RunEngines;

// One step: every rank allreduces (sum) tensors of several sizes at once
// (small ones fuse; the largest, 1.1 MB, crosses the direct thresholds the
// search tries), then checks every element (one assertion per tensor: per
// element, they made the test take minutes under TSan).
void Step(Engine& engine, int step,
          const std::vector<std::int64_t>& sizes = {100, 7, 100, 40000, 140000}) {
  // The buffers live as long as the rank's thread: a fresh 1.1 MB buffer every
  // step is an mmap and munmap, and ThreadSanitizer clears its shadow of each.
  thread_local std::vector<std::vector<double>> bufs;
  bufs.resize(sizes.size());
  std::vector<Completion> done(sizes.size());
  std::vector<Request> requests;
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    bufs[t].resize(static_cast<std::size_t>(sizes[t]));
    for (std::int64_t i = 0; i < sizes[t]; ++i)
      bufs[t][i] = engine.rank() + static_cast<double>((i + step) % 97);
    Request req;
    req.meta.name = fmt::format("grad{}", t);
    req.meta.dtype = DataType::kFloat64;
    req.meta.shape = {sizes[t]};
    req.input = req.output = bufs[t].data();
    req.done = done[t].Callback();
    requests.push_back(std::move(req));
  }
  for (const Status& s : engine.EnqueueAll(std::move(requests))) ASSERT_TRUE(s.ok()) << s.ToString();
  const double n = engine.size();
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    const Status s = Await(done[t], fmt::format("grad{} of step {}", t, step), DeadlineIn());
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::int64_t wrong = -1;
    for (std::int64_t i = 0; i < sizes[t] && wrong < 0; ++i)
      if (bufs[t][i] != n * (n - 1) / 2 + n * static_cast<double>((i + step) % 97)) wrong = i;
    ASSERT_EQ(wrong, -1) << "grad" << t << "[" << wrong << "] = " << bufs[t][wrong < 0 ? 0 : wrong]
                         << " of step " << step << " on rank " << engine.rank();
  }
}

EngineOptions Tuned() {
  EngineOptions o = testing::TestOptions();
  o.autotune.enabled = true;
  o.autotune.max_seconds = 3600;
  o.autotune.min_window_seconds = 0;  // windows of 5 busy cycles
  return o;
}

class EngineAutotuneTest : public ::testing::TestWithParam<int> {};

TEST_P(EngineAutotuneTest, TheSearchEndsWithTheSameSettingsOnEveryRankAndExactResults) {
  // At most (6 + 4 + 3) x 3 + 6 windows after two checks of warm-up, of 5
  // busy cycles each (6 message sizes at 3 ranks: the default, 393216, is
  // not one of the candidates): 235 cycles; a step is one or more busy cycles.
  constexpr int kSteps = 260;
  const auto stats = RunEngines(GetParam(), Tuned(), [](int, Engine& engine) {
    for (int step = 0; step < kSteps; ++step) Step(engine, step);
  });
  for (const EngineStats& s : stats) {
    EXPECT_TRUE(s.autotune.enabled);
    EXPECT_TRUE(s.autotune.done);
    // Candidates that run the same calls as their baseline are skipped
    // (which ones depends on the points the search kept) and a candidate far
    // slower than its baseline gets one window, but 65536 elements chunk the
    // 140,000-element tensor, and every direct threshold regroups one of the
    // two largest tensors: at least 3 + 1 and 3 + 3 windows.
    EXPECT_GE(s.autotune.windows, 9u);
    EXPECT_LE(s.autotune.windows, GetParam() == 2 ? 42u : 45u);
    EXPECT_EQ(s.autotune.windows, stats[0].autotune.windows);
    EXPECT_EQ(s.autotune.current, stats[0].autotune.current)
        << planning::Describe(s.autotune.current) << " against "
        << planning::Describe(stats[0].autotune.current);
  }
}

TEST_P(EngineAutotuneTest, SmallTensorsLeaveNothingToMeasure) {
  // Every candidate fuses the three tensors into one call of 207 elements.
  const auto stats = RunEngines(GetParam(), Tuned(), [](int, Engine& engine) {
    for (int step = 0; step < 20; ++step) Step(engine, step, {100, 7, 100});
  });
  for (const EngineStats& s : stats) {
    EXPECT_TRUE(s.autotune.done);
    EXPECT_EQ(s.autotune.windows, 0u);
    EXPECT_EQ(s.autotune.current.fusion_threshold, Tuned().fusion_threshold);
    EXPECT_EQ(s.autotune.current.direct_threshold, Tuned().direct_threshold);
  }
}

TEST_P(EngineAutotuneTest, TheTimeBoundStopsTheSearchAtItsFirstWindow) {
  EngineOptions o = Tuned();
  o.autotune.max_seconds = 0;
  const auto stats = RunEngines(GetParam(), o, [](int, Engine& engine) {
    for (int step = 0; step < 20; ++step) Step(engine, step);
  });
  for (const EngineStats& s : stats) {
    EXPECT_TRUE(s.autotune.done);
    EXPECT_EQ(s.autotune.windows, 1u);
    EXPECT_EQ(s.autotune.current.fusion_threshold, o.fusion_threshold);
    EXPECT_EQ(s.autotune.current.direct_threshold, o.direct_threshold);
  }
}

TEST_P(EngineAutotuneTest, SettingsFromTheEnvironmentAreNotTuned) {
  EngineOptions o = Tuned();
  o.autotune.fixed_direct = o.autotune.fixed_fusion = true;
  o.max_message_elements = 1000;
  o.autotune.fixed_message = true;
  const auto stats = RunEngines(GetParam(), o, [](int, Engine& engine) {
    for (int step = 0; step < 20; ++step) Step(engine, step);
  });
  for (const EngineStats& s : stats) {
    EXPECT_TRUE(s.autotune.enabled);
    EXPECT_EQ(s.autotune.windows, 0u);
    EXPECT_EQ(s.autotune.current.message_elements, 1000u);
    EXPECT_EQ(s.autotune.current.fusion_threshold, o.fusion_threshold);
  }
}

TEST_P(EngineAutotuneTest, ShortCyclesMakeLongerWindows) {
  EngineOptions o = Tuned();
  o.autotune.min_window_seconds = 3600;  // never reached: windows of max_window_cycles
  o.autotune.max_window_cycles = 20;
  constexpr int kSteps = 120;
  const auto stats = RunEngines(GetParam(), o, [](int, Engine& engine) {
    for (int step = 0; step < kSteps; ++step) Step(engine, step);
  });
  for (const EngineStats& s : stats) {
    // 10 busy cycles of warm-up, then windows of 20.
    EXPECT_GE(s.autotune.windows, 1u);
    EXPECT_LE(s.autotune.windows, (s.busy_cycles - 10) / 20);
    EXPECT_EQ(s.autotune.windows, stats[0].autotune.windows);
  }
}

TEST(EngineAutotune, OffByDefault) {
  const auto stats = RunEngines(2, testing::TestOptions(), [](int, Engine& engine) {
    for (int step = 0; step < 10; ++step) Step(engine, step);
  });
  for (const EngineStats& s : stats) EXPECT_FALSE(s.autotune.enabled);
}

INSTANTIATE_TEST_SUITE_P(Sizes, EngineAutotuneTest, ::testing::Values(2, 3));

}  // namespace
}  // namespace tfmpi
