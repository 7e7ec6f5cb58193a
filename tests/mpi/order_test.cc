// Out-of-order submission: every rank submits the same 50 named tensors
// (allreduce, broadcast and allgather of every dtype) in its own random order,
// from two threads at once, with random pauses. Everything completes with the
// right values, step after step; from the second step on, the response cache
// serves them (checked when it holds all 50). Step 6 changes every
// allgather's per-rank first dimension, which the cache must not serve stale.
//
// Usage: mpi_order_test [--cache-capacity=N]
#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <thread>

#include "mpi_test_util.h"
#include "patterns.h"

namespace tfmpi::mpitest {
namespace {

constexpr int kTensors = 50;
constexpr int kSteps = 7;
constexpr int kRowsChangeAtStep = 6;

// One named tensor of one step: its request and how to check the result.
struct Item {
  std::string name;
  Tensor in, out;
  Request request;
  std::function<void()> check;
  Completion done;
  bool queued = false;
};

void Build(MpiTest& t, int i, int step, Item* item) {
  const int K = t.size(), r = t.rank();
  const std::string name = fmt::format("order.{:02d}", i);
  item->name = name;
  const std::int64_t n = 1 + (i * 37) % 300;
  switch (i % 5) {
    case 0: {  // broadcast
      const DataType d = kAllDataTypes[(i / 5) % 8];
      const int root = i % K;
      item->out.Reset(d, {n});
      if (r == root) item->out.Fill([&](std::int64_t j) { return BroadcastValue(d, root, j + step); });
      else item->out.Fill([&](std::int64_t j) { return BroadcastSentinel(d, root, j + step); });
      item->request = BroadcastRequest(name, root, &item->out, &item->out);
      item->check = [&t, item, d, root, step] {
        t.ExpectTensor(item->out, [&](std::int64_t j) { return BroadcastValue(d, root, j + step); },
                       fmt::format("{} step {}", item->name, step));
      };
      return;
    }
    case 1: {  // allgather, some ranks with no rows
      const DataType d = kAllDataTypes[(i / 5 + 3) % 8];
      const int shift = step >= kRowsChangeAtStep ? 1 : 0;
      std::vector<std::int64_t> rows(static_cast<std::size_t>(K));
      for (int q = 0; q < K; ++q) rows[static_cast<std::size_t>(q)] = (q + i + shift) % 3;
      const std::int64_t cols = 1 + i % 4;
      item->in.Reset(d, {rows[static_cast<std::size_t>(r)], cols});
      item->in.Fill([&](std::int64_t j) { return GatherValue(d, r + step, j / cols, j % cols); });
      item->request = AllgatherRequest(name, item->in, &item->out);
      const Shape expected_shape{std::accumulate(rows.begin(), rows.end(), std::int64_t{0}), cols};
      item->check = [&t, item, d, rows, cols, step, expected_shape] {
        const std::string what = fmt::format("{} step {}", item->name, step);
        t.ExpectShape(item->out, expected_shape, what);
        if (item->out.shape() == expected_shape)
          t.ExpectTensor(item->out,
                         [&](std::int64_t j) { return GatheredValue(d, rows, cols, j, step); }, what);
      };
      return;
    }
    default: {  // allreduce with one of the dtype's reduce ops
      const DataType d = kAllDataTypes[i % 8];
      std::vector<ReduceOp> ops;
      for (ReduceOp op : kAllReduceOps)
        if (CheckReduceSupported(d, op).ok()) ops.push_back(op);
      const ReduceOp op = ops[static_cast<std::size_t>(i / 8) % ops.size()];
      item->in.Reset(d, {n});
      item->in.Fill([&](std::int64_t j) { return ReduceInput(d, op, r, j + step, K); });
      item->request = AllreduceRequest(name, op, item->in, &item->in);
      item->check = [&t, item, d, op, K, step] {
        t.ExpectTensor(item->in, [&](std::int64_t j) { return ReduceExpected(d, op, j + step, K); },
                       fmt::format("{} step {}", item->name, step), ReduceTolerance(d, op));
      };
      return;
    }
  }
}

void RunStep(MpiTest& t, int step, std::size_t cache_capacity) {
  std::vector<Item> items(kTensors);
  for (int i = 0; i < kTensors; ++i) Build(t, i, step, &items[static_cast<std::size_t>(i)]);

  std::vector<int> order(kTensors);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(static_cast<unsigned>(1000 * t.rank() + step));
  std::shuffle(order.begin(), order.end(), rng);

  const EngineStats before = t.SettledStats();
  std::vector<std::thread> threads;
  for (int th = 0; th < 2; ++th)
    threads.emplace_back([&, th] {
      std::mt19937 pause(static_cast<unsigned>(7919 * t.rank() + 31 * th + step));
      for (std::size_t k = static_cast<std::size_t>(th); k < order.size(); k += 2) {
        Item& item = items[static_cast<std::size_t>(order[k])];
        std::this_thread::sleep_for(std::chrono::microseconds(pause() % 300));
        Status s = t.Enqueue(std::move(item.request), item.done);
        item.queued = t.ExpectOk(s, fmt::format("enqueue {} step {}", item.name, step));
      }
    });
  for (std::thread& th : threads) th.join();
  for (Item& item : items) {
    if (!item.queued) continue;
    if (t.ExpectOk(t.Wait(item.done, item.name), fmt::format("{} step {}", item.name, step)))
      item.check();
  }
  const EngineStats after = t.SettledStats();
  const std::uint64_t hits = after.cache_hits - before.cache_hits;
  t.Note(fmt::format("step {}: {} of {} tensors served by the response cache", step, hits, kTensors));
  // Unchanged requests from the second step on: with room for all of them,
  // the cache serves every one (a rank never reports a cached request to the
  // coordinator while every request it has pending is cached).
  const bool unchanged = step > 1 && step != kRowsChangeAtStep;
  if (unchanged && cache_capacity >= kTensors)
    t.Expect(hits == kTensors, "step {}: the response cache served {} of {} repeated tensors",
             step, hits, kTensors);
}

}  // namespace
}  // namespace tfmpi::mpitest

int main(int argc, char** argv) {
  using namespace tfmpi::mpitest;
  tfmpi::EngineOptions options;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    const std::string flag = "--cache-capacity=";
    if (arg.rfind(flag, 0) == 0) {
      options.cache_capacity = std::stoul(arg.substr(flag.size()));
    } else {
      fmt::print(stderr, "usage: {} [--cache-capacity=N]\n", argv[0]);
      return 2;
    }
  }
  MpiTest t(fmt::format("order_test(cache {})", options.cache_capacity), options);
  for (int step = 1; step <= kSteps; ++step) RunStep(t, step, options.cache_capacity);
  return t.Finish();
}
