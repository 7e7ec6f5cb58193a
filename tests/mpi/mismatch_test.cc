// Ranks that disagree about a tensor: every rank gets a Mismatch status within
// seconds, naming the tensor, what differs and which ranks hold which
// version; the engine stays usable, the name can be reused, and a cached
// tensor that one rank later changes is caught too. Needs 2 or more ranks
// (with one rank there is nobody to disagree with: only a sanity check runs).
#include <chrono>
#include <vector>

#include "mpi_test_util.h"
#include "tfmpi/planning/rank_groups.h"
#include "patterns.h"

namespace tfmpi::mpitest {
namespace {

constexpr std::chrono::seconds kMismatchDeadline{5};

// "rank 1 has [5]" / "ranks 1-3 have [5]": how the engine names a group.
std::string Group(const std::vector<int>& ranks, const std::string& what) {
  return fmt::format("{} {} {} {}", ranks.size() == 1 ? "rank" : "ranks", planning::RankList(ranks),
                     ranks.size() == 1 ? "has" : "have", what);
}

std::vector<int> RanksExcept(int size, int except) {
  std::vector<int> out;
  for (int q = 0; q < size; ++q)
    if (q != except) out.push_back(q);
  return out;
}

// Runs `request` (this rank's version of a disagreeing tensor) and expects a
// Mismatch within kMismatchDeadline whose message contains every `part`.
void ExpectMismatch(MpiTest& t, Request request, const std::vector<std::string>& parts) {
  const std::string name = request.meta.name;
  const auto start = std::chrono::steady_clock::now();
  Status s = t.Run(std::move(request));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!t.Expect(s.code() == StatusCode::kMismatch, "tensor '{}': expected a Mismatch, got {}",
                name, s.ToString()))
    return;
  t.Note(fmt::format("after {:.3f} s: {}", secs, s.message()));
  t.Expect(secs < kMismatchDeadline.count(), "tensor '{}': the mismatch took {:.1f} s to report",
           name, secs);
  for (const std::string& part : parts)
    t.Expect(s.message().find(part) != std::string::npos,
             "tensor '{}': the mismatch message should contain \"{}\": {}", name, part,
             s.message());
}

// An allreduce (sum) of the ReduceInput pattern that must succeed.
void ExpectAllreduceWorks(MpiTest& t, const std::string& name, Shape shape) {
  const DataType d = DataType::kFloat32;
  Tensor x(d, std::move(shape));
  x.Fill([&](std::int64_t i) { return ReduceInput(d, ReduceOp::kSum, t.rank(), i, t.size()); });
  if (t.ExpectOk(t.Run(AllreduceRequest(name, ReduceOp::kSum, x, &x)), name))
    t.ExpectTensor(x, [&](std::int64_t i) { return ReduceExpected(d, ReduceOp::kSum, i, t.size()); },
                   name);
}

void TestDisagreements(MpiTest& t) {
  const int K = t.size(), r = t.rank();
  const bool first = r == 0;
  const std::vector<int> others = RanksExcept(K, 0);

  {  // shape: rank 0 has [4], the others [5]
    Tensor x(DataType::kFloat32, {first ? 4 : 5});
    ExpectMismatch(t, AllreduceRequest("bad", ReduceOp::kSum, x, &x),
                   {"'bad'", "shape", Group({0}, "[4]"), Group(others, "[5]")});
  }
  {  // dtype
    Tensor x(first ? DataType::kFloat32 : DataType::kInt32, {3});
    ExpectMismatch(t, AllreduceRequest("bad.dtype", ReduceOp::kSum, x, &x),
                   {"'bad.dtype'", "dtype", Group({0}, "float32"), Group(others, "int32")});
  }
  {  // reduce op
    Tensor x(DataType::kFloat32, {3});
    ExpectMismatch(t, AllreduceRequest("bad.op", first ? ReduceOp::kSum : ReduceOp::kMax, x, &x),
                   {"'bad.op'", "reduce op", Group({0}, "sum"), Group(others, "max")});
  }
  {  // broadcast root
    Tensor x(DataType::kInt64, {3});
    ExpectMismatch(t, BroadcastRequest("bad.root", first ? 0 : 1, &x, &x),
                   {"'bad.root'", "root", Group({0}, "root 0"), Group(others, "root 1")});
  }
  {  // collective kind
    Tensor x(DataType::kFloat32, {3});
    Request req = first ? AllreduceRequest("bad.kind", ReduceOp::kSum, x, &x)
                        : BroadcastRequest("bad.kind", 0, &x, &x);
    ExpectMismatch(t, std::move(req),
                   {"'bad.kind'", "operation", Group({0}, "allreduce"), Group(others, "broadcast")});
  }
  {  // allgather: first dimensions may differ, the others may not
    Tensor x(DataType::kUInt8, {r + 1, first ? 3 : 4});
    Tensor out;
    ExpectMismatch(t, AllgatherRequest("bad.allgather", x, &out),
                   {"'bad.allgather'", Group({0}, "trailing dimensions [3]"),
                    Group(others, "trailing dimensions [4]")});
  }
  {  // the last rank is the odd one out
    Tensor x(DataType::kFloat64, {r == K - 1 ? 6 : 5});
    ExpectMismatch(t, AllreduceRequest("bad.last", ReduceOp::kMax, x, &x),
                   {"'bad.last'", Group({K - 1}, "[6]"), Group(RanksExcept(K, K - 1), "[5]")});
  }
}

// A tensor the response cache knows, then submitted differently by one rank.
void TestMismatchAfterCaching(MpiTest& t) {
  const std::vector<int> others = RanksExcept(t.size(), 0);
  ExpectAllreduceWorks(t, "cached", {5});
  ExpectAllreduceWorks(t, "cached", {5});  // served by the cache
  Tensor x(DataType::kFloat32, {t.rank() == 0 ? 4 : 5});
  ExpectMismatch(t, AllreduceRequest("cached", ReduceOp::kSum, x, &x),
                 {"'cached'", Group({0}, "[4]"), Group(others, "[5]")});
  // Now everyone but rank 0 changes it.
  Tensor y(DataType::kFloat32, {t.rank() == 0 ? 5 : 7});
  ExpectMismatch(t, AllreduceRequest("cached", ReduceOp::kSum, y, &y),
                 {"'cached'", Group({0}, "[5]"), Group(others, "[7]")});
  ExpectAllreduceWorks(t, "cached", {5});
}

// A mismatch among good tensors submitted in the same batch fails only itself.
void TestMismatchAmongGoodTensors(MpiTest& t) {
  const int K = t.size(), r = t.rank();
  Batch b;
  for (int i = 0; i < 6; ++i) {
    const DataType d = DataType::kInt32;
    const std::string name = fmt::format("good.{}", i);
    Tensor& x = b.NewTensor(d, {i + 1});
    x.Fill([&](std::int64_t j) { return ReduceInput(d, ReduceOp::kSum, r, j, K); });
    b.Add(AllreduceRequest(name, ReduceOp::kSum, x, &x), [&t, &x, d, K, name](const Status& s) {
      if (t.ExpectOk(s, name))
        t.ExpectTensor(x, [&](std::int64_t j) { return ReduceExpected(d, ReduceOp::kSum, j, K); },
                       name);
    });
    if (i == 2) {
      Tensor& bad = b.NewTensor(d, {r == 0 ? 4 : 5});
      b.Add(AllreduceRequest("bad.batched", ReduceOp::kSum, bad, &bad), [&t](const Status& s) {
        t.Expect(s.code() == StatusCode::kMismatch,
                 "bad.batched: expected a Mismatch among good tensors, got {}", s.ToString());
      });
    }
  }
  b.Run(t, /*all_at_once=*/true);
}

}  // namespace
}  // namespace tfmpi::mpitest

int main() {
  using namespace tfmpi::mpitest;
  MpiTest t("mismatch_test", tfmpi::EngineOptions{});
  if (t.size() < 2) {
    t.Note("a mismatch needs 2 or more ranks; only checking that the engine works");
    ExpectAllreduceWorks(t, "sanity", {5});
    return t.Finish();
  }
  TestDisagreements(t);
  ExpectAllreduceWorks(t, "after.mismatches", {1000});
  ExpectAllreduceWorks(t, "bad", {5});  // the name is free again, now agreed
  TestMismatchAfterCaching(t);
  TestMismatchAmongGoodTensors(t);
  return t.Finish();
}
