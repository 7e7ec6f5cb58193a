// Note [Engine errors]: transport failures and exceptions on the engine
// thread never end the process. Every request completes exactly once with an
// error, the engine refuses new ones, no collective is issued after a
// transport failure, and a rank whose callback threw leaves cleanly, telling
// the others why.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <new>
#include <stdexcept>

#include "contains.h"
#include "engine_ranks.h"

namespace tfmpi {
namespace {

using testing::Await;
using testing::Contains;
using testing::DeadlineIn;
using testing::ForwardingCommunicator;
using testing::RunEngines;
using testing::TestOptions;

// A request's completion plus the number of times its callback fired.
struct Tracked {
  Completion completion;
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);

  DoneCallback Callback() const {
    return [c = completion.Callback(), n = calls](const Status& s) {
      ++*n;
      c(s);
    };
  }
};

Request Sum(const std::string& name, void* buf, std::int64_t n, DataType dtype,
            DoneCallback done) {
  Request req;
  req.meta.name = name;
  req.meta.dtype = dtype;
  req.meta.shape = {n};
  req.input = req.output = buf;
  req.done = std::move(done);
  return req;
}

Request Barrier(const std::string& name, DoneCallback done) {
  Request req;
  req.meta.name = name;
  req.meta.kind = CollectiveKind::kBarrier;
  req.meta.dtype = DataType::kUInt8;
  req.done = std::move(done);
  return req;
}

// Per-rank call counts, kept outside the communicator (the engine destroys it).
struct Calls {
  std::atomic<int> allreduces{0};
  std::atomic<int> after_failure{0};  // any call once an allreduce has failed
};

// Every data-plane allreduce fails, returning an error or throwing.
class FailingAllreduce final : public ForwardingCommunicator {
 public:
  FailingAllreduce(std::unique_ptr<Communicator> inner, Calls* calls, bool throws)
      : ForwardingCommunicator(std::move(inner)), calls_(calls), throws_(throws) {}
  Status Allreduce(const void*, void*, std::size_t, DataType, ReduceOp) override {
    if (failed_) ++calls_->after_failure;
    ++calls_->allreduces;
    failed_ = true;
    if (throws_) throw std::runtime_error("injected allreduce exception");
    return Status::Internal("injected allreduce failure");
  }
  Status Broadcast(void* buf, std::size_t count, DataType dtype, int root) override {
    Count();
    return ForwardingCommunicator::Broadcast(buf, count, dtype, root);
  }
  Status Allgatherv(const void* in, void* out, const std::vector<std::size_t>& counts,
                    DataType dtype) override {
    Count();
    return ForwardingCommunicator::Allgatherv(in, out, counts, dtype);
  }
  Status Barrier() override {
    Count();
    return ForwardingCommunicator::Barrier();
  }
  Status BitwiseAnd(std::uint64_t* words, std::size_t n) override {
    Count();
    return ForwardingCommunicator::BitwiseAnd(words, n);
  }
  Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override {
    Count();
    return ForwardingCommunicator::GatherToRoot(mine, all);
  }
  Status BroadcastFromRoot(std::string* data) override {
    Count();
    return ForwardingCommunicator::BroadcastFromRoot(data);
  }

 private:
  void Count() {
    if (failed_) ++calls_->after_failure;
  }
  Calls* calls_;
  bool throws_;
  bool failed_ = false;
};

class TransportFailureTest : public ::testing::TestWithParam<bool> {
 protected:
  bool throws() const { return GetParam(); }
  std::string injected() const {
    return throws() ? "injected allreduce exception" : "injected allreduce failure";
  }
};

// Three allreduces of different dtypes (three groups) are decided in one
// cycle: they are enqueued together from a barrier's callback, on the engine
// thread, so every rank takes them in with one swap. The first group fails;
// the other two must not reach the communicator, and nothing else does either.
// A request only rank 0 submitted fails with the engine's stop status, and
// the stopped engine refuses new requests saying why.
TEST_P(TransportFailureTest, NoCollectiveRunsAfterTheFirstFailure) {
  const int size = 3;
  std::vector<Calls> calls(size);
  RunEngines(
      size, TestOptions(),
      [&](int rank, Engine& engine) {
        float f32 = 1;
        double f64 = 1;
        std::int32_t i32 = 1;
        float stranded_buf = 1;
        Tracked a, b, c, stranded, trigger;
        if (rank == 0) {
          ASSERT_TRUE(engine.Enqueue(Sum("only_rank_0", &stranded_buf, 1, DataType::kFloat32,
                                         stranded.Callback()))
                          .ok());
        }
        std::vector<Status> enqueued;
        auto done = trigger.Callback();
        ASSERT_TRUE(engine
                        .Enqueue(Barrier("trigger",
                                         [&, done](const Status& s) {
                                           enqueued.push_back(engine.Enqueue(Sum(
                                               "a", &f32, 1, DataType::kFloat32, a.Callback())));
                                           enqueued.push_back(engine.Enqueue(Sum(
                                               "b", &f64, 1, DataType::kFloat64, b.Callback())));
                                           enqueued.push_back(engine.Enqueue(Sum(
                                               "c", &i32, 1, DataType::kInt32, c.Callback())));
                                           done(s);
                                         }))
                        .ok());
        ASSERT_TRUE(Await(trigger.completion, "trigger", DeadlineIn()).ok());
        for (const Status& s : enqueued) ASSERT_TRUE(s.ok()) << s.ToString();
        for (const Tracked* t : {&a, &b, &c}) {
          const Status s = Await(t->completion, "a/b/c", DeadlineIn());
          EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
          EXPECT_TRUE(Contains(s.message(), {injected()}));
        }
        if (rank == 0) {
          const Status s = Await(stranded.completion, "only_rank_0", DeadlineIn());
          EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
          EXPECT_TRUE(Contains(s.message(), {"tfmpi stopped on rank 0 after a failure",
                                             "no further collectives", injected()}));
        }
        engine.Shutdown();  // the engine has stopped by itself; this only joins it
        float late = 1;
        bool called = false;
        const Status refused = engine.Enqueue(
            Sum("late", &late, 1, DataType::kFloat32, [&](const Status&) { called = true; }));
        EXPECT_EQ(refused.code(), StatusCode::kInternal) << refused.ToString();
        EXPECT_TRUE(Contains(refused.message(), {"no further collectives", injected()}));
        EXPECT_FALSE(called);
        for (const Tracked* t : {&a, &b, &c, &trigger})
          EXPECT_EQ(t->calls->load(), 1) << "every callback fires exactly once";
        EXPECT_EQ(stranded.calls->load(), rank == 0 ? 1 : 0);
      },
      [&](int rank, std::unique_ptr<Communicator> inner) -> std::unique_ptr<Communicator> {
        return std::make_unique<FailingAllreduce>(std::move(inner),
                                                  &calls[static_cast<std::size_t>(rank)],
                                                  throws());
      });
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(calls[r].allreduces.load(), 1) << "rank " << r;
    EXPECT_EQ(calls[r].after_failure.load(), 0) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(ErrorOrException, TransportFailureTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "throws" : "returns_error"; });

// Rank 0's first full round throws (std::bad_alloc) while the other ranks are
// in it. Rank 0 stops and abandons the world; the others' transport fails in
// turn. Every request on every rank fails exactly once; nobody hangs. (The
// first gather is the start-up check of the settings: it passes.)
class GatherThrowsOnRank0 final : public ForwardingCommunicator {
 public:
  GatherThrowsOnRank0(int rank, std::unique_ptr<Communicator> inner)
      : ForwardingCommunicator(std::move(inner)), rank_(rank) {}
  Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override {
    if (rank_ == 0 && gathers_++ == 1) throw std::bad_alloc();
    return ForwardingCommunicator::GatherToRoot(mine, all);
  }

 private:
  int rank_;
  int gathers_ = 0;
};

TEST(EngineFailures, ExceptionInNegotiationFailsEveryRequestOnEveryRank) {
  for (int size : {1, 2, 4}) {
    SCOPED_TRACE("size " + std::to_string(size));
    std::atomic<int> total_accepted{0};
    RunEngines(
        size, TestOptions(),
        [&](int rank, Engine& engine) {
          // The engine may stop after the first request: later ones are then
          // refused at once and never called back.
          std::vector<float> bufs(5, 1.0f);
          std::vector<Tracked> tracked(5);
          std::vector<bool> accepted(5);
          for (int i = 0; i < 5; ++i) {
            const Status s = engine.Enqueue(Sum("t" + std::to_string(i), &bufs[i], 1,
                                                DataType::kFloat32, tracked[i].Callback()));
            accepted[i] = s.ok();
            total_accepted += s.ok();
            if (!s.ok()) {
              EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
            }
          }
          for (int i = 0; i < 5; ++i) {
            if (!accepted[i]) continue;
            const Status s = Await(tracked[i].completion, "t" + std::to_string(i), DeadlineIn());
            EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
            EXPECT_TRUE(Contains(s.message(), {fmt::format("stopped on rank {} after a failure",
                                                           rank)}));
            if (rank == 0) {
              EXPECT_TRUE(Contains(s.message(), {"unexpected exception on the engine thread",
                                                 "out of memory"}));
            } else {
              EXPECT_TRUE(Contains(s.message(), {"rank 0 abandoned the world"}));
            }
          }
          engine.Shutdown();
          for (int i = 0; i < 5; ++i)
            EXPECT_EQ(tracked[i].calls->load(), accepted[i] ? 1 : 0) << i;
          float late = 1;
          EXPECT_EQ(engine.Enqueue(Sum("late", &late, 1, DataType::kFloat32, nullptr)).code(),
                    StatusCode::kInternal);
        },
        [](int rank, std::unique_ptr<Communicator> inner) -> std::unique_ptr<Communicator> {
          return std::make_unique<GatherThrowsOnRank0>(rank, std::move(inner));
        });
    EXPECT_GT(total_accepted.load(), 0);  // some request reached the failing engine
  }
}

// Rank 1's callback of 'x' throws. 'x' itself completed everywhere. Rank 1
// then leaves: its pending request fails, it refuses new ones, and the
// others' requests that wait for it fail naming rank 1 and the error, even
// one that rank 1 had submitted (and failed) before it left.
TEST(EngineFailures, ThrowingCallbackMakesTheRankLeaveAndTellTheOthers) {
  const int size = 3;
  std::promise<void> left;
  std::shared_future<void> left_f = left.get_future().share();
  RunEngines(size, TestOptions(), [&](int rank, Engine& engine) {
    float x = 1, own = 1, z = 1;
    Tracked x_done, own_done, z_done;
    if (rank == 1) {  // pending when 'x' completes: only rank 1 submits it
      ASSERT_TRUE(
          engine.Enqueue(Sum("rank_1_only", &own, 1, DataType::kFloat32, own_done.Callback()))
              .ok());
    }
    DoneCallback x_cb = x_done.Callback();
    if (rank == 1) {
      x_cb = [inner = std::move(x_cb)](const Status& s) {
        inner(s);
        throw std::runtime_error("boom in a callback");
      };
    }
    ASSERT_TRUE(engine.Enqueue(Sum("x", &x, 1, DataType::kFloat32, std::move(x_cb))).ok());
    const Status xs = Await(x_done.completion, "x", DeadlineIn());
    EXPECT_TRUE(xs.ok()) << xs.ToString();
    EXPECT_EQ(x, static_cast<float>(size));
    if (rank == 1) {
      const Status s = Await(own_done.completion, "rank_1_only", DeadlineIn());
      EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
      EXPECT_TRUE(Contains(s.message(),
                           {"tfmpi stopped on rank 1 after an error on its engine thread",
                            "the completion callback of tensor 'x' threw: boom in a callback"}));
      // Refused from now on (poll: the refusal starts on the engine thread).
      Status refused;
      for (int i = 0; i < 1000 && refused.ok(); ++i) {
        refused = engine.Enqueue(Sum("late", &z, 1, DataType::kFloat32, z_done.Callback()));
        if (refused.ok()) {
          (void)Await(z_done.completion, "late", DeadlineIn());
          z_done = Tracked();
        }
      }
      EXPECT_EQ(refused.code(), StatusCode::kInternal) << refused.ToString();
      EXPECT_TRUE(Contains(refused.message(), {"boom in a callback"}));
      left.set_value();
    } else {
      ASSERT_EQ(left_f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
      ASSERT_TRUE(engine.Enqueue(Sum("z", &z, 1, DataType::kFloat32, z_done.Callback())).ok());
      ASSERT_TRUE(
          engine.Enqueue(Sum("rank_1_only", &own, 1, DataType::kFloat32, own_done.Callback()))
              .ok());
      for (const Tracked* t : {&z_done, &own_done}) {
        const Status s = Await(t->completion, "z / rank_1_only", DeadlineIn());
        EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
        EXPECT_TRUE(Contains(s.message(), {"rank 1 stopped with an error: the completion "
                                           "callback of tensor 'x' threw: boom in a callback",
                                           fmt::format("Rank {} was still waiting for", rank)}));
      }
      EXPECT_EQ(z, 1.0f);
      EXPECT_EQ(own, 1.0f);
    }
    for (const Tracked* t : {&x_done, &own_done, &z_done})
      EXPECT_LE(t->calls->load(), 1) << "at most once";
    EXPECT_EQ(x_done.calls->load(), 1);
  });
}

// An allgather whose output allocator throws fails that request only: the
// collective runs (the other ranks get their result) and the engine carries on.
TEST(EngineFailures, ThrowingOutputAllocatorFailsOnlyItsRequest) {
  const int size = 3;
  RunEngines(size, TestOptions(), [&](int rank, Engine& engine) {
    std::vector<float> in(2, static_cast<float>(rank));
    std::vector<float> out;
    Tracked done;
    Request req;
    req.meta.name = "gather";
    req.meta.kind = CollectiveKind::kAllgather;
    req.meta.dtype = DataType::kFloat32;
    req.meta.shape = {2};
    req.input = in.data();
    req.allocate_output = [&](const Shape& shape) -> void* {
      if (rank == 0) throw std::bad_alloc();
      out.resize(static_cast<std::size_t>(NumElements(shape)));
      return out.data();
    };
    req.done = done.Callback();
    ASSERT_TRUE(engine.Enqueue(std::move(req)).ok());
    const Status s = Await(done.completion, "gather", DeadlineIn());
    if (rank == 0) {
      EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
      EXPECT_TRUE(Contains(s.message(), {"'gather'", "could not allocate the allgather output [6]",
                                         "out of memory"}));
    } else {
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(out, (std::vector<float>{0, 0, 1, 1, 2, 2}));
    }
    testing::SumOnce(engine, "after", 4);
    EXPECT_EQ(done.calls->load(), 1);
  });
}

TEST(EngineFailures, ThrowingFactoryIsAStartError) {
  std::unique_ptr<Engine> engine;
  const Status s = Engine::Start(
      TestOptions(),
      [](std::unique_ptr<Communicator>*) -> Status { throw std::runtime_error("no MPI here"); },
      &engine);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_TRUE(Contains(s.message(), {"could not start", "no MPI here"}));
  EXPECT_EQ(engine, nullptr);
}

}  // namespace
}  // namespace tfmpi
