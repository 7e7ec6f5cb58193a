// Messages larger than one MPI call may carry (Note [Large messages]): with
// max_message_elements lowered to 1000, a 10,007-element tensor is split into
// 11 chunks, and allreduce (every dtype, alone and fused), broadcast from
// every root and allgather (both the Allgatherv and the per-rank broadcast
// paths) must still be exact. Negotiation messages are chunked the same way.
#include "mpi_test_util.h"
#include "patterns.h"

namespace tfmpi::mpitest {
namespace {

constexpr std::size_t kMaxMessageElements = 1000;
constexpr std::int64_t kElements = 10007;  // 10 full chunks and a partial one

void AddAllreduce(MpiTest& t, Batch& b, const std::string& name, DataType d, ReduceOp op,
                  std::int64_t n, bool in_place) {
  const int K = t.size(), r = t.rank();
  Tensor& in = b.NewTensor(d, {n});
  in.Fill([&](std::int64_t i) { return ReduceInput(d, op, r, i, K); });
  Tensor* out = in_place ? &in : &b.NewTensor(d, {n});
  b.Add(AllreduceRequest(name, op, in, out), [&t, out, d, op, K, name](const Status& s) {
    if (t.ExpectOk(s, name))
      t.ExpectTensor(*out, [&](std::int64_t i) { return ReduceExpected(d, op, i, K); }, name,
                     ReduceTolerance(d, op));
  });
}

void TestAllreduce(MpiTest& t) {
  // Alone: the tensor goes to MPI straight from the caller's buffer.
  for (DataType d : kAllDataTypes) {
    const ReduceOp op = d == DataType::kBool ? ReduceOp::kMin
                        : IsFloatingPoint(d) ? ReduceOp::kAverage
                                             : ReduceOp::kSum;
    for (ReduceOp o : {op, ReduceOp::kMax}) {
      Batch b;
      AddAllreduce(t, b, fmt::format("large.allreduce.{}.{}", DataTypeName(d), ReduceOpName(o)), d,
                   o, kElements, static_cast<int>(d) % 2 == 0);
      b.Run(t, false);
    }
  }
  // Fused: 9 tensors of 1,501 elements share a buffer of 13,509 elements;
  // the long names make the negotiation messages exceed 1000 bytes too.
  Batch b;
  for (int i = 0; i < 9; ++i)
    AddAllreduce(t, b,
                 fmt::format("large.fused.{}.a_long_name_so_that_negotiation_messages_are_chunked",
                             i),
                 DataType::kFloat16, ReduceOp::kSum, 1501, i % 2 == 0);
  b.Run(t, true);
}

// Reduces to every rank, fused: with 1000 elements a call, the group runs in
// rounds, each a piece of every rank's segment (Note [Owner layout]); and one
// alone, in place, in chunks of its own.
void TestReduce(MpiTest& t) {
  const int K = t.size();
  Batch b;
  for (int i = 0; i <= K; ++i) {
    const int root = i % K;  // the last one: a dtype of its own, so it runs alone
    const DataType d = i == K ? DataType::kFloat64 : DataType::kFloat32;
    const ReduceOp op = i == K ? ReduceOp::kAverage : ReduceOp::kSum;
    AddReduce(t, b, fmt::format("large.reduce.{}.root{}.{}", DataTypeName(d), root, i), d, op,
              root, kElements - i, i == K);
  }
  b.Run(t, true);
}

void TestBroadcast(MpiTest& t) {
  Batch b;
  for (int root = 0; root < t.size(); ++root)
    for (DataType d : {DataType::kFloat32, DataType::kUInt8, DataType::kBFloat16}) {
      const std::string name = fmt::format("large.broadcast.{}.root{}", DataTypeName(d), root);
      Tensor& out = b.NewTensor(d, {kElements});
      if (t.rank() == root) out.Fill([&](std::int64_t i) { return BroadcastValue(d, root, i); });
      else out.Fill([&](std::int64_t i) { return BroadcastSentinel(d, root, i); });
      b.Add(BroadcastRequest(name, root, &out, &out), [&t, &out, d, root, name](const Status& s) {
        if (t.ExpectOk(s, name))
          t.ExpectTensor(out, [&](std::int64_t i) { return BroadcastValue(d, root, i); }, name);
      });
    }
  b.Run(t, false);
}

void AddAllgather(MpiTest& t, Batch& b, const std::string& name, DataType d,
                  const std::function<std::int64_t(int)>& rows_of, std::int64_t cols) {
  const int K = t.size(), r = t.rank();
  std::vector<std::int64_t> rows;
  std::int64_t total = 0;
  for (int q = 0; q < K; ++q) total += rows.emplace_back(rows_of(q));
  Tensor& in = b.NewTensor(d, {rows[static_cast<std::size_t>(r)], cols});
  in.Fill([&](std::int64_t i) { return GatherValue(d, r, i / cols, i % cols); });
  Tensor& out = b.NewTensor(d, {});
  const Shape expected{total, cols};
  b.Add(AllgatherRequest(name, in, &out), [&t, &out, d, rows, cols, expected, name](const Status& s) {
    if (!t.ExpectOk(s, name)) return;
    t.ExpectShape(out, expected, name);
    if (out.shape() == expected)
      t.ExpectTensor(out, [&](std::int64_t i) { return GatheredValue(d, rows, cols, i); }, name);
  });
}

void TestAllgather(MpiTest& t) {
  Batch b;
  // More than 1000 elements in all: every rank broadcasts its block in chunks.
  AddAllgather(t, b, "large.allgather.chunked", DataType::kInt32,
               [](int q) { return std::int64_t{1000} * q + 3; }, 4);
  AddAllgather(t, b, "large.allgather.chunked.rank0_empty", DataType::kFloat16,
               [](int q) { return std::int64_t{2600} * q; }, 2);
  AddAllgather(t, b, "large.allgather.chunked.one_rank", DataType::kUInt8,
               [](int q) { return q == 0 ? kElements : 0; }, 1);
  // At most 1000 elements in all: one MPI_Allgatherv.
  AddAllgather(t, b, "large.allgather.small", DataType::kFloat64,
               [](int q) { return std::int64_t{q} + 1; }, 5);
  b.Run(t, false);
}

}  // namespace
}  // namespace tfmpi::mpitest

int main() {
  using namespace tfmpi::mpitest;
  tfmpi::EngineOptions options;
  options.max_message_elements = kMaxMessageElements;
  MpiTest t("large_message_test", options);
  TestAllreduce(t);
  TestBroadcast(t);
  TestReduce(t);
  TestAllgather(t);
  return t.Finish();
}
