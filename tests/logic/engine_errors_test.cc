// Engine error paths: ranks that disagree about a tensor, invalid and
// duplicate requests, and the shutdown lifecycle. Failures of the transport
// and exceptions are in engine_failures_test.cc.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <future>

#include "contains.h"
#include "tfmpi/planning/rank_groups.h"
#include "engine_ranks.h"

namespace tfmpi {
namespace {

using testing::Contains;
using testing::Await;
using testing::DeadlineIn;
using testing::RunEngines;
using testing::TestOptions;

// "rank 3 has [2]" / "ranks 0-2 have [4]": how decision errors list ranks.
std::string Holders(int first, int last, const std::string& value) {
  std::vector<int> ranks;
  for (int r = first; r <= last; ++r) ranks.push_back(r);
  return fmt::format("{} {} {} {}", ranks.size() == 1 ? "rank" : "ranks", planning::RankList(ranks),
                     ranks.size() == 1 ? "has" : "have", value);
}

// A sum allreduce of `buf` (read as `dtype`), which the caller keeps alive.
Request Sum(const std::string& name, std::vector<float>* buf, const Completion& done,
            DataType dtype = DataType::kFloat32) {
  Request req;
  req.meta.name = name;
  req.meta.dtype = dtype;
  req.meta.shape = {static_cast<std::int64_t>(buf->size() * sizeof(float) / DataTypeSize(dtype))};
  req.input = req.output = buf->data();
  req.done = done.Callback();
  return req;
}

class EngineMismatchTest : public ::testing::TestWithParam<int> {
 protected:
  int size() const { return GetParam(); }
};

// Rank size-1 submits 'w' with another shape after 'w' was cached, and rank 0
// submits a fresh 'fresh' with another dtype. Both fail on every rank, quickly,
// naming the tensor and the ranks; an unrelated tensor in the same step, and
// 'w' in the next step, still work.
TEST_P(EngineMismatchTest, FailsOnEveryRankAndTheEngineCarriesOn) {
  const int last = size() - 1;
  RunEngines(size(), TestOptions(), [&](int rank, Engine& engine) {
    auto step = [&](std::int64_t w_len, DataType fresh_dtype, bool expect_ok) {
      std::vector<float> w(static_cast<std::size_t>(w_len), 1.0f), side(3, 2.0f), fresh(4, 0.0f);
      Completion w_done, side_done, fresh_done;
      ASSERT_TRUE(engine.Enqueue(Sum("w", &w, w_done)).ok());
      ASSERT_TRUE(engine.Enqueue(Sum("side", &side, side_done)).ok());
      if (!expect_ok) {
        ASSERT_TRUE(engine.Enqueue(Sum("fresh", &fresh, fresh_done, fresh_dtype)).ok());
      }
      const auto deadline = DeadlineIn(std::chrono::seconds(5));
      const Status ws = Await(w_done, "w", deadline);
      const Status ss = Await(side_done, "side", deadline);
      EXPECT_TRUE(ss.ok()) << ss.ToString();
      EXPECT_EQ(side, std::vector<float>(3, 2.0f * size()));
      if (expect_ok) {
        EXPECT_TRUE(ws.ok()) << ws.ToString();
        EXPECT_EQ(w, std::vector<float>(w.size(), static_cast<float>(size())));
        return;
      }
      EXPECT_EQ(ws.code(), StatusCode::kMismatch) << ws.ToString();
      EXPECT_TRUE(Contains(ws.message(), {"'w'", "shape", Holders(0, last - 1, "[4]"),
                                          Holders(last, last, "[2]")}));
      const Status fs = Await(fresh_done, "fresh", deadline);
      EXPECT_EQ(fs.code(), StatusCode::kMismatch) << fs.ToString();
      EXPECT_TRUE(Contains(fs.message(), {"'fresh'", "dtype", Holders(0, 0, "float64"),
                                          Holders(1, last, "float32")}));
    };
    step(4, DataType::kFloat32, true);  // caches 'w'
    // Shape [2] vs [4]: rank `last` passes 8 bytes of its buffer; rank 0 says float64.
    step(rank == last ? 2 : 4, rank == 0 ? DataType::kFloat64 : DataType::kFloat32, false);
    step(4, DataType::kFloat32, true);
  });
}

// An operation mismatch where one rank asks for an allgather.
TEST_P(EngineMismatchTest, KindMismatch) {
  RunEngines(size(), TestOptions(), [&](int rank, Engine& engine) {
    std::vector<float> buf(2, 1.0f);
    Completion done;
    Request req = Sum("k", &buf, done);
    bool allocated = false;
    if (rank == 1) {
      req.meta.kind = CollectiveKind::kAllgather;
      req.output = nullptr;
      req.allocate_output = [&allocated](const Shape&) -> void* {
        allocated = true;
        return nullptr;
      };
    }
    ASSERT_TRUE(engine.Enqueue(std::move(req)).ok());
    const Status s = Await(done, "k", DeadlineIn(std::chrono::seconds(5)));
    EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), {"'k'", "rank 1 has allgather"}));
    EXPECT_FALSE(allocated) << "a failed tensor must not run";
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, EngineMismatchTest, ::testing::Range(2, 17),
                         [](const auto& info) { return "ranks_" + std::to_string(info.param); });

// Rank 0 enqueues 'dup' twice while rank 1 holds back, so the first is surely
// still in flight: the second is refused at once, and the name is free again
// after the first completes.
TEST(EngineErrors, DuplicateInFlightNameIsRefused) {
  std::promise<void> checked;
  std::shared_future<void> checked_f = checked.get_future().share();
  RunEngines(2, TestOptions(), [&](int rank, Engine& engine) {
    std::vector<float> a(2, 1.0f), b(2, 5.0f);
    Completion first, second;
    if (rank == 0) {
      ASSERT_TRUE(engine.Enqueue(Sum("dup", &a, first)).ok());
      int calls = 0;
      Request again = Sum("dup", &b, second);
      again.done = [&calls](const Status&) { ++calls; };
      const Status s = engine.Enqueue(std::move(again));
      checked.set_value();
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_TRUE(Contains(s.message(), {"'dup'", "already in flight", "rank 0"}));
      EXPECT_TRUE(Await(first, "dup", DeadlineIn()).ok());
      EXPECT_EQ(calls, 0) << "a refused request never completes";
      EXPECT_EQ(b, std::vector<float>(2, 5.0f)) << "a refused request never runs";
    } else {
      ASSERT_EQ(checked_f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
      ASSERT_TRUE(engine.Enqueue(Sum("dup", &a, first)).ok());
      EXPECT_TRUE(Await(first, "dup", DeadlineIn()).ok());
    }
    EXPECT_EQ(a, std::vector<float>(2, 2.0f));
    Completion reuse;
    ASSERT_TRUE(engine.Enqueue(Sum("dup", &b, reuse)).ok()) << "the name is free again";
    EXPECT_TRUE(Await(reuse, "dup again", DeadlineIn()).ok());
  });
}

TEST(EngineErrors, EnqueueAfterShutdownIsAFailedPrecondition) {
  for (int size : {1, 3}) {
    auto world = std::make_shared<InProcWorld>(size);
    testing::Spawn(size, [&](int rank) {
      std::unique_ptr<Engine> engine;
      ASSERT_TRUE(Engine::Start(
                      TestOptions(),
                      [&](std::unique_ptr<Communicator>* out) {
                        *out = std::make_unique<InProcCommunicator>(world, rank);
                        return Status::Ok();
                      },
                      &engine)
                      .ok());
      engine->Shutdown();
      std::vector<float> buf(1);
      bool called = false;
      Request req = Sum("late", &buf, Completion());
      req.done = [&called](const Status&) { called = true; };
      const Status s = engine->Enqueue(std::move(req));
      EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
      EXPECT_TRUE(Contains(s.message(), {"shut down"}));
      EXPECT_FALSE(called);
    });
  }
}

// A tensor only some ranks submitted is aborted by the (collective) shutdown.
TEST(EngineErrors, PendingRequestIsAbortedAtShutdown) {
  RunEngines(2, TestOptions(), [&](int rank, Engine& engine) {
    if (rank != 0) return;
    std::vector<float> buf(2, 1.0f);
    auto done = std::make_shared<Completion>();
    Request req = Sum("orphan", &buf, *done);
    ASSERT_TRUE(engine.Enqueue(std::move(req)).ok());
    engine.Shutdown();
    Status s;
    ASSERT_TRUE(done->WaitFor(std::chrono::seconds(5), &s)) << "shutdown completes every request";
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
    EXPECT_EQ(buf, std::vector<float>(2, 1.0f));
  });
}

TEST(EngineErrors, InvalidRequestsAreRefusedAtEnqueue) {
  RunEngines(2, TestOptions(), [&](int, Engine& engine) {
    std::vector<float> buf(4, 1.0f);
    auto expect_invalid = [&](Request req, const char* what, const char* text) {
      bool called = false;
      req.done = [&called](const Status&) { called = true; };
      const Status s = engine.Enqueue(std::move(req));
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what << ": " << s.ToString();
      EXPECT_TRUE(Contains(s.message(), {text})) << what;
      EXPECT_FALSE(called) << what;
    };
    Completion unused;
    Request r = Sum("", &buf, unused);
    expect_invalid(r, "empty name", "non-empty tensor name");
    r = Sum("neg", &buf, unused);
    r.meta.shape = {2, -2};
    expect_invalid(r, "negative dimension", "negative dimension");
    r = Sum("avg_int", &buf, unused, DataType::kInt32);
    r.meta.op = ReduceOp::kAverage;
    expect_invalid(r, "average of int32", "'avg_int'");
    r = Sum("bool_sum", &buf, unused, DataType::kBool);
    expect_invalid(r, "sum of bool", "'bool_sum'");
    r = Sum("no_buffer", &buf, unused);
    r.output = nullptr;
    expect_invalid(r, "null output", "null buffer");
    r = Sum("bad_root", &buf, unused);
    r.meta.kind = CollectiveKind::kBroadcast;
    r.meta.root = 2;
    expect_invalid(r, "root out of range", "root 2 is not a rank (world size 2)");
    r.meta.root = -1;
    expect_invalid(r, "negative root", "root -1");
    r = Sum("scalar_gather", &buf, unused);
    r.meta.kind = CollectiveKind::kAllgather;
    r.meta.shape = {};
    expect_invalid(r, "scalar allgather", "scalar");
    r = Sum("huge", &buf, unused);
    r.meta.shape = {std::int64_t{1} << 40, std::int64_t{1} << 40};
    expect_invalid(r, "overflowing shape", "too large");

    // The engine still works, and none of those names is stuck in flight.
    Completion ok;
    ASSERT_TRUE(engine.Enqueue(Sum("no_buffer", &buf, ok)).ok());
    EXPECT_TRUE(Await(ok, "no_buffer", DeadlineIn()).ok());
    EXPECT_EQ(buf, std::vector<float>(4, 2.0f));
  });
}

TEST(EngineErrors, StartReportsTheFactoryError) {
  std::unique_ptr<Engine> engine;
  const Status s = Engine::Start(
      TestOptions(),
      [](std::unique_ptr<Communicator>*) { return Status::Internal("no transport today"); },
      &engine);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "no transport today");
  EXPECT_EQ(engine, nullptr);
}

}  // namespace
}  // namespace tfmpi
