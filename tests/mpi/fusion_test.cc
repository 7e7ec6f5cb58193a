// The fused path (many small tensors packed into one collective per cycle)
// and the direct path (tensors of at least the direct threshold reduced in the
// caller's memory) both give correct results, averages included; the engine's
// statistics show which path ran.
#include "mpi_test_util.h"
#include "patterns.h"

namespace tfmpi::mpitest {
namespace {

constexpr std::size_t kFusionThreshold = 64u << 10;  // small, so a batch needs several buffers
constexpr std::size_t kDirectThreshold = 1u << 20;

struct Delta {
  std::uint64_t tensors, groups, fused_groups;
};

Delta RunAndCount(MpiTest& t, Batch& b) {
  const EngineStats before = t.SettledStats();
  b.Run(t, /*all_at_once=*/true);
  const EngineStats after = t.SettledStats();
  return {after.tensors - before.tensors, after.groups - before.groups,
          after.fused_groups - before.fused_groups};
}

// Adds an allreduce of `n` elements with the ReduceInput pattern and its check.
void AddAllreduce(MpiTest& t, Batch& b, const std::string& name, DataType d, ReduceOp op,
                  std::int64_t n, bool in_place) {
  const int K = t.size(), r = t.rank();
  Tensor& in = b.NewTensor(d, {n});
  in.Fill([&](std::int64_t i) { return ReduceInput(d, op, r, i, K); });
  Tensor* out = in_place ? &in : &b.NewTensor(d, {n});
  b.Add(AllreduceRequest(name, op, in, out), [&t, &in, out, d, op, K, r, name, in_place](const Status& s) {
    if (!t.ExpectOk(s, name)) return;
    t.ExpectTensor(*out, [&](std::int64_t i) { return ReduceExpected(d, op, i, K); }, name,
                   ReduceTolerance(d, op));
    if (!in_place)
      t.ExpectTensor(in, [&](std::int64_t i) { return ReduceInput(d, op, r, i, K); },
                     name + " input (must be left alone)");
  });
}

void AddBroadcast(MpiTest& t, Batch& b, const std::string& name, DataType d, int root,
                  std::int64_t n) {
  Tensor& out = b.NewTensor(d, {n});
  if (t.rank() == root) out.Fill([&](std::int64_t i) { return BroadcastValue(d, root, i); });
  else out.Fill([&](std::int64_t i) { return BroadcastSentinel(d, root, i); });
  b.Add(BroadcastRequest(name, root, &out, &out), [&t, &out, d, root, name](const Status& s) {
    if (!t.ExpectOk(s, name)) return;
    t.ExpectTensor(out, [&](std::int64_t i) { return BroadcastValue(d, root, i); }, name);
  });
}

void TestFusedAllreduce(MpiTest& t) {
  Batch b;
  for (int i = 0; i < 64; ++i)  // 4..800 bytes each, ~26 KB in all: fits one buffer
    AddAllreduce(t, b, fmt::format("fused.sum.{}", i), DataType::kFloat32, ReduceOp::kSum,
                 i % 16 == 15 ? 0 : (i * 13) % 200 + 1, i % 2 == 0);
  Delta d = RunAndCount(t, b);
  t.Note(fmt::format("64 small allreduces ran as {} collectives ({} fused)", d.groups, d.fused_groups));
  t.Expect(d.tensors == 64, "fused.sum: {} tensors executed, expected 64", d.tensors);
  t.Expect(d.fused_groups >= 1 && d.groups < 64,
           "fused.sum: 64 small tensors submitted together ran as {} collectives ({} fused); "
           "expected some to share a fusion buffer", d.groups, d.fused_groups);
}

void TestFusionThreshold(MpiTest& t) {
  Batch b;
  for (int i = 0; i < 48; ++i)  // 4 KiB each, 192 KiB in all: at least 3 buffers
    AddAllreduce(t, b, fmt::format("fused.split.{}", i), DataType::kInt32, ReduceOp::kMax, 1024,
                 i % 3 == 0);
  Delta d = RunAndCount(t, b);
  t.Expect(d.groups >= 3, "fused.split: 192 KiB of tensors with a {} KiB fusion threshold ran "
           "as {} collectives; expected at least 3", kFusionThreshold >> 10, d.groups);
}

void TestFusedAverage(MpiTest& t) {
  Batch b;
  const DataType floats[] = {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                             DataType::kFloat64};
  for (int i = 0; i < 48; ++i) {
    const DataType d = floats[i % 4];
    AddAllreduce(t, b, fmt::format("fused.average.{}.{}", DataTypeName(d), i), d,
                 ReduceOp::kAverage, (i * 7) % 50 + 1, i % 3 == 0);
  }
  Delta d = RunAndCount(t, b);
  t.Expect(d.groups >= 4, "fused.average: 4 dtypes ran as {} collectives; dtypes can't share one",
           d.groups);
}

void TestFusedBroadcast(MpiTest& t) {
  Batch b;
  const int root = t.size() - 1;
  for (int i = 0; i < 40; ++i) {
    const DataType d = i % 2 ? DataType::kUInt8 : DataType::kInt64;
    AddBroadcast(t, b, fmt::format("fused.broadcast.{}", i), d, root, (i * 11) % 97 + 1);
  }
  Delta d = RunAndCount(t, b);
  t.Expect(d.groups < 40, "fused.broadcast: 40 small broadcasts ran as {} collectives", d.groups);
}

// Reduces to every rank in turn: one reduce-scatter per fused group (Note
// [Owner layout]); large ones run alone, straight from the caller's buffers.
void TestReduce(MpiTest& t) {
  Batch b;
  for (int i = 0; i < 40; ++i)
    AddReduce(t, b, fmt::format("fused.reduce.{}", i), i % 4 == 3 ? DataType::kFloat64 : DataType::kFloat32,
              i % 4 == 3 ? ReduceOp::kAverage : ReduceOp::kSum, i % t.size(), (i * 17) % 300 + 1,
              i % 3 == 0);
  AddReduce(t, b, "direct.reduce.float32", DataType::kFloat32, ReduceOp::kSum, t.size() - 1,
            (1 << 18) + 3, false);
  AddReduce(t, b, "direct.reduce.bfloat16", DataType::kBFloat16, ReduceOp::kAverage, 0, 1 << 20,
            true);
  Delta d = RunAndCount(t, b);
  t.Expect(d.tensors == 42 && d.groups < 42 && d.fused_groups >= 1,
           "reduce: 42 tensors ran as {} collectives ({} fused)", d.groups, d.fused_groups);
}

// Broadcasts from every rank in one cycle: fused into one allgather.
void TestOwnerBroadcast(MpiTest& t) {
  Batch b;
  for (int i = 0; i < 24; ++i)
    AddBroadcast(t, b, fmt::format("fused.owners.{}", i), DataType::kInt32, i % t.size(),
                 (i * 5) % 40 + 1);
  Delta d = RunAndCount(t, b);
  t.Expect(d.groups < 24, "owner broadcasts: 24 small broadcasts ran as {} collectives", d.groups);
}

void TestDirect(MpiTest& t) {
  Batch b;
  const std::int64_t mib = 1 << 20;
  AddAllreduce(t, b, "direct.sum.float32", DataType::kFloat32, ReduceOp::kSum, 3 * mib / 4, false);
  AddAllreduce(t, b, "direct.average.float32", DataType::kFloat32, ReduceOp::kAverage, 3 * mib / 4,
               true);
  AddAllreduce(t, b, "direct.average.float16", DataType::kFloat16, ReduceOp::kAverage, 2 * mib,
               false);
  AddAllreduce(t, b, "direct.average.bfloat16", DataType::kBFloat16, ReduceOp::kAverage, 2 * mib,
               true);
  AddAllreduce(t, b, "direct.max.int64", DataType::kInt64, ReduceOp::kMax, 5 * mib / 8, true);
  AddAllreduce(t, b, "direct.product.float64", DataType::kFloat64, ReduceOp::kProduct, mib / 8,
               false);  // exactly the threshold
  AddBroadcast(t, b, "direct.broadcast.uint8", DataType::kUInt8, 0, 4 * mib);
  Delta d = RunAndCount(t, b);
  t.Expect(d.groups == 7 && d.fused_groups == 0,
           "direct: 7 tensors of at least {} bytes ran as {} collectives ({} fused); each "
           "should run alone", kDirectThreshold, d.groups, d.fused_groups);
}

void TestMixed(MpiTest& t) {
  Batch b;
  for (int i = 0; i < 24; ++i) {
    if (i % 6 == 0)
      AddAllreduce(t, b, fmt::format("mixed.large.{}", i), DataType::kFloat32, ReduceOp::kAverage,
                   (1 << 18) + i, i % 12 == 0);
    else
      AddAllreduce(t, b, fmt::format("mixed.small.{}", i), DataType::kFloat32, ReduceOp::kAverage,
                   i * 10, i % 2 == 0);
  }
  Delta d = RunAndCount(t, b);
  t.Expect(d.groups >= 4 + 1, "mixed: 4 large and 20 small tensors ran as {} collectives",
           d.groups);
}

}  // namespace
}  // namespace tfmpi::mpitest

int main() {
  using namespace tfmpi::mpitest;
  tfmpi::EngineOptions options;
  options.fusion_threshold = kFusionThreshold;
  options.direct_threshold = kDirectThreshold;
  options.cycle_time_ms = 5;  // a batch enqueued at once lands in one cycle
  MpiTest t("fusion_test", options);
  TestFusedAllreduce(t);
  TestFusionThreshold(t);
  TestFusedAverage(t);
  TestFusedBroadcast(t);
  TestReduce(t);
  TestOwnerBroadcast(t);
  TestDirect(t);
  TestMixed(t);
  return t.Finish();
}
