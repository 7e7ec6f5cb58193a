// Every collective over MPI: allreduce for every dtype x reduce op (and the
// unsupported pairs refused by Enqueue), broadcast from every root for every
// dtype, allgather with a different first dimension on every rank (one of
// them 0) for every dtype, barrier, empty tensors and invalid requests.
// Each section runs twice: one request at a time, then all enqueued together.
#include <atomic>
#include <memory>
#include <numeric>

#include "mpi_test_util.h"
#include "patterns.h"

namespace tfmpi::mpitest {
namespace {

std::string Name(const char* what, DataType d, bool batched, const std::string& extra = "") {
  return fmt::format("{}.{}{}.{}", what, DataTypeName(d), extra, batched ? "batched" : "alone");
}

void AddAllreduce(MpiTest& t, Batch& b, const std::string& name, DataType d, ReduceOp op,
                  const Shape& shape, bool in_place) {
  const int K = t.size(), r = t.rank();
  Tensor& in = b.NewTensor(d, shape);
  in.Fill([&](std::int64_t i) { return ReduceInput(d, op, r, i, K); });
  Tensor* out = in_place ? &in : &b.NewTensor(d, shape);
  b.Add(AllreduceRequest(name, op, in, out), [&t, &in, out, d, op, K, r, name,
                                              in_place](const Status& s) {
    if (!t.ExpectOk(s, name)) return;
    t.ExpectTensor(*out, [&](std::int64_t i) { return ReduceExpected(d, op, i, K); }, name,
                   ReduceTolerance(d, op));
    if (!in_place)
      t.ExpectTensor(in, [&](std::int64_t i) { return ReduceInput(d, op, r, i, K); },
                     name + " input (must be left alone)");
  });
}

void AddAllreduces(MpiTest& t, Batch& b, bool batched) {
  int n = 0;
  for (DataType d : kAllDataTypes)
    for (ReduceOp op : kAllReduceOps) {
      if (!CheckReduceSupported(d, op).ok()) continue;
      for (const Shape& shape : {Shape{3, 5}, Shape{7}})  // two, so batched ones fuse
        AddAllreduce(t, b,
                     Name("allreduce", d, batched,
                          fmt::format(".{}.{}d", ReduceOpName(op), shape.size())),
                     d, op, shape, ++n % 3 == 0);
    }
}

// `in_place`: the root passes one buffer as input and output, and the other
// ranks pass an input buffer (which must be ignored) instead of none.
void AddBroadcast(MpiTest& t, Batch& b, const std::string& name, DataType d, int root,
                  const Shape& shape, bool in_place) {
  const int r = t.rank();
  Tensor& out = b.NewTensor(d, shape);
  out.Fill([&](std::int64_t i) { return BroadcastSentinel(d, root, i); });
  const Tensor* in = nullptr;
  if (r == root && in_place) {
    out.Fill([&](std::int64_t i) { return BroadcastValue(d, root, i); });
    in = &out;
  } else if (r == root) {
    Tensor& src = b.NewTensor(d, shape);
    src.Fill([&](std::int64_t i) { return BroadcastValue(d, root, i); });
    in = &src;
  } else if (in_place) {
    Tensor& junk = b.NewTensor(d, shape);
    junk.Fill([&](std::int64_t i) { return BroadcastSentinel(d, root, i); });
    in = &junk;
  }
  b.Add(BroadcastRequest(name, root, in, &out), [&t, &out, in, d, root, r, name](const Status& s) {
    if (!t.ExpectOk(s, name)) return;
    t.ExpectTensor(out, [&](std::int64_t i) { return BroadcastValue(d, root, i); }, name);
    if (r == root && in != &out)
      t.ExpectTensor(*in, [&](std::int64_t i) { return BroadcastValue(d, root, i); },
                     name + " root input (must be left alone)");
  });
}

void AddBroadcasts(MpiTest& t, Batch& b, bool batched) {
  int n = 0;
  for (DataType d : kAllDataTypes)
    for (int root = 0; root < t.size(); ++root)
      for (const Shape& shape : {Shape{2, 7}, Shape{5}})  // two, so batched ones fuse
        AddBroadcast(t, b,
                     Name("broadcast", d, batched, fmt::format(".root{}.{}d", root, shape.size())),
                     d, root, shape, ++n % 2 == 0);
}

// Rank q contributes rows_of(q) rows of shape `trailing`.
void AddAllgather(MpiTest& t, Batch& b, DataType d, const std::string& name,
                  const std::function<std::int64_t(int)>& rows_of, const Shape& trailing) {
  const int K = t.size(), r = t.rank();
  std::vector<std::int64_t> rows(static_cast<std::size_t>(K));
  for (int q = 0; q < K; ++q) rows[static_cast<std::size_t>(q)] = rows_of(q);
  const std::int64_t cols = NumElements(trailing);
  Shape in_shape{rows[static_cast<std::size_t>(r)]};
  in_shape.insert(in_shape.end(), trailing.begin(), trailing.end());
  Shape out_shape{std::accumulate(rows.begin(), rows.end(), std::int64_t{0})};
  out_shape.insert(out_shape.end(), trailing.begin(), trailing.end());
  Tensor& in = b.NewTensor(d, in_shape);
  in.Fill([&](std::int64_t i) { return GatherValue(d, r, i / cols, i % cols); });
  Tensor& out = b.NewTensor(d, {});
  b.Add(AllgatherRequest(name, in, &out), [&t, &out, d, rows, cols, out_shape, name](const Status& s) {
    if (!t.ExpectOk(s, name)) return;
    t.ExpectShape(out, out_shape, name);
    if (out.shape() != out_shape) return;
    t.ExpectTensor(out, [&](std::int64_t i) { return GatheredValue(d, rows, cols, i); }, name);
  });
}

void AddAllgathers(MpiTest& t, Batch& b, bool batched) {
  for (DataType d : kAllDataTypes) {
    AddAllgather(t, b, d, Name("allgather", d, batched, ".rows_r_plus_1"),
                 [](int q) { return q + 1; }, {3});
    // Rank 0 contributes nothing (with one rank, the result is empty).
    AddAllgather(t, b, d, Name("allgather", d, batched, ".rows_r"), [](int q) { return q; }, {3});
    AddAllgather(t, b, d, Name("allgather", d, batched, ".1d"),
                 [](int q) { return 2 * q + 1; }, {});
    AddAllgather(t, b, d, Name("allgather", d, batched, ".3d"),
                 [](int q) { return q % 2 + 1; }, {2, 2});
  }
}

// Zero-element tensors and a scalar: no data moves, every request completes OK.
void AddEdgeCases(MpiTest& t, Batch& b, bool batched) {
  const int K = t.size();
  const std::string sfx = batched ? ".batched" : ".alone";
  Tensor& empty = b.NewTensor(DataType::kFloat32, {0});
  b.Add(AllreduceRequest("empty.allreduce" + sfx, ReduceOp::kSum, empty, &empty),
        [&t, sfx](const Status& s) { t.ExpectOk(s, "empty.allreduce" + sfx); });
  Tensor& empty2 = b.NewTensor(DataType::kInt32, {0, 4});
  b.Add(BroadcastRequest("empty.broadcast" + sfx, K - 1, &empty2, &empty2),
        [&t, sfx](const Status& s) { t.ExpectOk(s, "empty.broadcast" + sfx); });
  AddAllgather(t, b, DataType::kFloat64, "empty.allgather" + sfx, [](int) { return 0; }, {5});
  Tensor& scalar = b.NewTensor(DataType::kInt64, {});
  scalar.Fill([&](std::int64_t) { return t.rank() + 1; });
  b.Add(AllreduceRequest("scalar.allreduce" + sfx, ReduceOp::kSum, scalar, &scalar),
        [&t, &scalar, K, sfx](const Status& s) {
          if (!t.ExpectOk(s, "scalar.allreduce" + sfx)) return;
          t.ExpectTensor(scalar, [&](std::int64_t) { return K * (K + 1) / 2; },
                         "scalar.allreduce" + sfx);
        });
}

void TestUnsupportedOps(MpiTest& t) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  int refused = 0;
  for (DataType d : kAllDataTypes)
    for (ReduceOp op : kAllReduceOps) {
      if (CheckReduceSupported(d, op).ok()) continue;
      const std::string name = fmt::format("unsupported.{}.{}", DataTypeName(d), ReduceOpName(op));
      Tensor in(d, {4});
      in.Fill([](std::int64_t) { return 1; });
      Request req = AllreduceRequest(name, op, in, &in);
      req.done = [calls](const Status&) { ++*calls; };
      Status s = t.engine().Enqueue(std::move(req));
      t.Expect(s.code() == StatusCode::kInvalidArgument,
               "{}: Enqueue should refuse it with InvalidArgument, got {}", name, s.ToString());
      t.Expect(s.message().find("'" + name + "'") != std::string::npos &&
                   s.message().find(ReduceOpName(op)) != std::string::npos,
               "{}: the refusal should name the tensor and the op: {}", name, s.message());
      ++refused;
    }
  // average x {int32, int64, uint8, bool} and bool x {sum, product}.
  t.Expect(refused == 6, "expected 6 unsupported dtype/op pairs, found {}", refused);
  // Run something so a wrongly queued request would have completed by now.
  Tensor x(DataType::kInt32, {1});
  t.ExpectOk(t.Run(AllreduceRequest("unsupported.after", ReduceOp::kSum, x, &x)),
             "allreduce after the refusals");
  t.Expect(calls->load() == 0, "a refused request's callback ran {} times", calls->load());
}

void TestInvalidRequests(MpiTest& t) {
  const int K = t.size();
  auto expect_refused = [&t](Request req, const std::string& what) {
    auto called = std::make_shared<std::atomic<bool>>(false);
    req.done = [called](const Status&) { *called = true; };
    Status s = t.engine().Enqueue(std::move(req));
    t.Expect(s.code() == StatusCode::kInvalidArgument,
             "{}: Enqueue should refuse it with InvalidArgument, got {}", what, s.ToString());
    t.Expect(!*called, "{}: a refused request's callback ran", what);
  };
  Tensor v(DataType::kFloat32, {4});
  expect_refused(BroadcastRequest("invalid.root_too_big", K, &v, &v), "broadcast root == size");
  expect_refused(BroadcastRequest("invalid.root_negative", -1, &v, &v), "broadcast root -1");
  Tensor scalar(DataType::kFloat32, {});
  Tensor out;
  expect_refused(AllgatherRequest("invalid.allgather_scalar", scalar, &out), "allgather of a scalar");
  expect_refused(AllreduceRequest("", ReduceOp::kSum, v, &v), "empty name");
  Request negative = AllreduceRequest("invalid.negative_dim", ReduceOp::kSum, v, &v);
  negative.meta.shape = {4, -1};
  expect_refused(std::move(negative), "negative dimension");
  Request null_buffer = AllreduceRequest("invalid.null_buffer", ReduceOp::kSum, v, &v);
  null_buffer.output = nullptr;
  expect_refused(std::move(null_buffer), "null output buffer");
}

void TestBarriers(MpiTest& t) {
  for (int i = 0; i < 3; ++i)
    t.ExpectOk(t.Run(BarrierRequest(fmt::format("barrier.{}", i))), fmt::format("barrier {}", i));
  // Several barriers in flight at once, under different names.
  std::vector<Request> all;
  for (int i = 0; i < 4; ++i) all.push_back(BarrierRequest(fmt::format("barrier.concurrent.{}", i)));
  for (const Status& s : t.RunAll(std::move(all))) t.ExpectOk(s, "concurrent barrier");
}

}  // namespace
}  // namespace tfmpi::mpitest

int main() {
  using namespace tfmpi::mpitest;
  MpiTest t("collectives_test", tfmpi::EngineOptions{});
  for (bool batched : {false, true}) {
    Batch b;
    AddAllreduces(t, b, batched);
    AddBroadcasts(t, b, batched);
    AddAllgathers(t, b, batched);
    AddEdgeCases(t, b, batched);
    t.Note(fmt::format("{} collectives {}", b.size(), batched ? "enqueued together" : "one at a time"));
    b.Run(t, batched);
  }
  TestUnsupportedOps(t);
  TestInvalidRequests(t);
  TestBarriers(t);
  return t.Finish();
}
