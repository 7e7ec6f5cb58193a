// A mixed workload for whole-engine tests: every dtype and reduce op,
// reduces to several roots (fused into reduce-scatters), broadcasts from
// several roots, allgathers with per-rank first dimensions,
// zero-length tensors, in-place buffers and a barrier. Every rank builds the
// same named tensors with its own data; the expected results are closed forms
// of the world size, so any size can be checked.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine_ranks.h"
#include "typed_values.h"

namespace tfmpi::testing {

// One tensor of one rank: its request data, what it must come back as, and
// the completion to wait on. Held by shared_ptr from the request's callbacks,
// so its buffers outlive the request even if a test gives up waiting.
struct Planned {
  TensorMeta meta;
  std::vector<unsigned char> input, output;
  bool in_place = false;
  bool null_input = false;         // a broadcast non-root passing no input
  std::vector<double> expected;    // element values of the result
  double tolerance = 0;            // relative; 0: exact
  Shape expected_shape;            // allgather: the gathered shape
  Shape gathered_shape;            // allgather: what the engine asked to allocate
  std::vector<unsigned char> gathered;
  Completion done;
};

using Workload = std::vector<std::shared_ptr<Planned>>;

inline bool IsSignedType(DataType d) { return d != DataType::kUInt8 && d != DataType::kBool; }

// Inputs and results of allreduce, per op. Sums stay <= 200 and products are
// +-2, so every dtype (uint8 and bfloat16 included) holds them exactly.
inline double AllreduceInput(ReduceOp op, DataType d, int r, int size, std::int64_t i) {
  const int owner = static_cast<int>(i % size);  // the one rank that decides element i
  if (d == DataType::kBool)
    return op == ReduceOp::kMin ? (i % 2 == 0 || r != owner) : (i % 2 == 0 && r == owner);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return r + 1 + static_cast<double>(i % 5);
    case ReduceOp::kMin:
    case ReduceOp::kMax: return 10 + static_cast<double>((r + i) % size);
    case ReduceOp::kProduct:
      return (r == owner ? 2 : 1) * (IsSignedType(d) && r == 0 && i % 3 == 0 ? -1 : 1);
  }
  return 0;
}

inline double AllreduceExpected(ReduceOp op, DataType d, int size, std::int64_t i) {
  if (d == DataType::kBool) return i % 2 == 0 ? 1 : 0;
  switch (op) {
    case ReduceOp::kSum: return size * (size + 1) / 2 + size * static_cast<double>(i % 5);
    case ReduceOp::kAverage: return (size + 1) / 2.0 + static_cast<double>(i % 5);
    case ReduceOp::kMin: return 10;
    case ReduceOp::kMax: return 10 + size - 1;
    case ReduceOp::kProduct: return 2 * (IsSignedType(d) && i % 3 == 0 ? -1 : 1);
  }
  return 0;
}

inline double BroadcastValue(DataType d, int root, std::int64_t i) {
  return d == DataType::kBool ? static_cast<double>((root + i) % 2)
                              : static_cast<double>((root * 3 + i) % 50 + 1);
}

inline double GatherValue(DataType d, int r, std::int64_t j) {
  return d == DataType::kBool ? static_cast<double>((r + j) % 2)
                              : static_cast<double>((r * 7 + j) % 60);
}

class WorkloadBuilder {
 public:
  WorkloadBuilder(int rank, int size) : rank_(rank), size_(size) {}

  void Allreduce(const std::string& name, DataType d, ReduceOp op, Shape shape, bool in_place) {
    auto p = New(name, CollectiveKind::kAllreduce, d, shape);
    p->meta.op = op;
    p->in_place = in_place;
    const std::int64_t n = NumElements(shape);
    for (std::int64_t i = 0; i < n; ++i) {
      StoreAs(d, p->input.data(), static_cast<std::size_t>(i),
              AllreduceInput(op, d, rank_, size_, i));
      p->expected.push_back(AllreduceExpected(op, d, size_, i));
    }
    if (op == ReduceOp::kAverage) p->tolerance = 2 * Epsilon(d);  // one rounded division
    if (!in_place) p->output.assign(p->input.size(), 0xAB);
    out_.push_back(p);
  }

  // Reduced to `root` only: elsewhere the output is the rank's own input.
  void Reduce(const std::string& name, DataType d, ReduceOp op, int root, Shape shape,
              bool in_place) {
    auto p = New(name, CollectiveKind::kReduce, d, shape);
    p->meta.op = op;
    p->meta.root = root;
    p->in_place = in_place;
    const std::int64_t n = NumElements(shape);
    for (std::int64_t i = 0; i < n; ++i) {
      const double mine = AllreduceInput(op, d, rank_, size_, i);
      StoreAs(d, p->input.data(), static_cast<std::size_t>(i), mine);
      p->expected.push_back(rank_ == root ? AllreduceExpected(op, d, size_, i) : mine);
    }
    if (op == ReduceOp::kAverage) p->tolerance = 2 * Epsilon(d);
    if (!in_place) p->output.assign(p->input.size(), 0xAB);
    out_.push_back(p);
  }

  void Broadcast(const std::string& name, DataType d, int root, Shape shape, bool in_place,
                 bool null_input_off_root = false) {
    auto p = New(name, CollectiveKind::kBroadcast, d, shape);
    p->meta.root = root;
    p->in_place = in_place;
    const std::int64_t n = NumElements(shape);
    for (std::int64_t i = 0; i < n; ++i) {
      const double v = BroadcastValue(d, root, i);
      StoreAs(d, p->input.data(), static_cast<std::size_t>(i),
              rank_ == root ? v : (d == DataType::kBool ? 1 - v : 99));
      p->expected.push_back(v);
    }
    p->null_input = rank_ != root && null_input_off_root;
    if (!in_place) p->output.assign(p->input.size(), 0xAB);
    out_.push_back(p);
  }

  // Rank r contributes first_dim(r) rows of the trailing shape.
  template <typename FirstDim>
  void Allgather(const std::string& name, DataType d, FirstDim first_dim, Shape trailing) {
    Shape mine = {first_dim(rank_)};
    mine.insert(mine.end(), trailing.begin(), trailing.end());
    auto p = New(name, CollectiveKind::kAllgather, d, mine);
    const std::int64_t row = NumElements(trailing);
    for (std::int64_t j = 0; j < first_dim(rank_) * row; ++j)
      StoreAs(d, p->input.data(), static_cast<std::size_t>(j), GatherValue(d, rank_, j));
    std::int64_t rows = 0;
    for (int r = 0; r < size_; ++r) {
      rows += first_dim(r);
      for (std::int64_t j = 0; j < first_dim(r) * row; ++j)
        p->expected.push_back(GatherValue(d, r, j));
    }
    p->expected_shape = {rows};
    p->expected_shape.insert(p->expected_shape.end(), trailing.begin(), trailing.end());
    out_.push_back(p);
  }

  void Barrier(const std::string& name) {
    out_.push_back(New(name, CollectiveKind::kBarrier, DataType::kFloat32, {}));
  }

  Workload Take() { return std::move(out_); }

 private:
  std::shared_ptr<Planned> New(const std::string& name, CollectiveKind kind, DataType d,
                               const Shape& shape) {
    auto p = std::make_shared<Planned>();
    p->meta.name = name;
    p->meta.kind = kind;
    p->meta.dtype = d;
    p->meta.shape = shape;
    if (kind != CollectiveKind::kBarrier) p->input.assign(p->meta.bytes(), 0);
    return p;
  }

  int rank_, size_;
  Workload out_;
};

// The full mix, with two families of small same-key tensors ("fuse.*") so
// that fusion has something to group.
inline Workload MixedWorkload(int rank, int size) {
  WorkloadBuilder b(rank, size);
  int k = 0;
  for (DataType d : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      if (!CheckReduceSupported(d, op).ok()) continue;
      const std::int64_t n = 1 + (k * 5) % 13;
      b.Allreduce(fmt::format("allreduce.{}.{}", DataTypeName(d), ReduceOpName(op)), d, op,
                  k % 4 == 3 ? Shape{2, n} : Shape{n}, k % 3 == 0);
      ++k;
    }
  }
  b.Allreduce("allreduce.float64.sum.scalar", DataType::kFloat64, ReduceOp::kSum, {}, false);
  b.Allreduce("allreduce.float32.sum.empty", DataType::kFloat32, ReduceOp::kSum, {0}, false);
  b.Allreduce("allreduce.int64.max.empty", DataType::kInt64, ReduceOp::kMax, {3, 0}, true);
  for (int j = 0; j < 8; ++j)  // one fusion key, 4..32 bytes each
    b.Allreduce(fmt::format("fuse.float32.average.{}", j), DataType::kFloat32, ReduceOp::kAverage,
                {j + 1}, j % 2 == 1);

  // Reduces: owners spread over the ranks, so fused groups hold several
  // roots (one reduce-scatter, Note [Owner layout]); sizes that do not divide.
  for (int j = 0; j < 10; ++j)
    b.Reduce(fmt::format("fuse.reduce.float32.sum.{}", j), DataType::kFloat32, ReduceOp::kSum,
             (j * 3) % size, {1 + (j * 7) % 11}, j % 3 == 0);
  for (int j = 0; j < 4; ++j)
    b.Reduce(fmt::format("fuse.reduce.float64.average.{}", j), DataType::kFloat64,
             ReduceOp::kAverage, (size - 1 + j) % size, {2 + j}, j % 2 == 0);
  b.Reduce("reduce.int32.max", DataType::kInt32, ReduceOp::kMax, size / 2, {9}, false);
  b.Reduce("reduce.bfloat16.sum", DataType::kBFloat16, ReduceOp::kSum, size - 1, {5}, true);
  b.Reduce("reduce.float32.sum.empty", DataType::kFloat32, ReduceOp::kSum, 0, {0}, false);

  std::vector<int> roots = {0, size / 2, size - 1};
  roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
  const DataType bcast_types[] = {DataType::kFloat32, DataType::kInt64,  DataType::kBFloat16,
                                  DataType::kUInt8,   DataType::kBool,   DataType::kFloat16};
  int t = 0;
  for (int root : roots)
    for (int j = 0; j < 2; ++j, ++t)
      b.Broadcast(fmt::format("broadcast.root{}.{}", root, DataTypeName(bcast_types[t])),
                  bcast_types[t], root, {3 + t}, t % 2 == 1, t == 2);
  b.Broadcast("broadcast.float16.empty", DataType::kFloat16, size - 1, {0}, false);
  for (int j = 0; j < 4; ++j)
    b.Broadcast(fmt::format("fuse.broadcast.{}", j), DataType::kInt32, size - 1, {j + 2}, false);
  for (int j = 0; j < 4; ++j)  // the same key from other roots: one group of several roots
    b.Broadcast(fmt::format("fuse.broadcast.owners.{}", j), DataType::kInt32, j % size, {j + 3},
                j == 1);

  b.Allgather("allgather.int32.rows", DataType::kInt32, [](int r) { return r % 3; }, {2});
  b.Allgather("allgather.float64.vector", DataType::kFloat64, [](int r) { return r + 1; }, {});
  b.Allgather("allgather.float16.blocks", DataType::kFloat16,
              [size](int r) { return (size - r) % 2; }, {2, 2});
  b.Allgather("allgather.uint8.empty", DataType::kUInt8, [](int) { return 0; }, {3});
  b.Barrier("barrier");
  return b.Take();
}

inline Request MakeRequest(const std::shared_ptr<Planned>& p) {
  Request req;
  req.meta = p->meta;
  req.input = p->null_input ? nullptr : p->input.data();
  req.output = p->in_place ? p->input.data() : p->output.data();
  if (p->meta.kind == CollectiveKind::kAllgather || p->meta.kind == CollectiveKind::kBarrier)
    req.output = nullptr;
  if (p->meta.kind == CollectiveKind::kAllgather) {
    req.allocate_output = [p](const Shape& shape) -> void* {
      p->gathered_shape = shape;
      p->gathered.assign(static_cast<std::size_t>(NumElements(shape)) * DataTypeSize(p->meta.dtype),
                         0xAB);
      return p->gathered.data();
    };
  }
  req.done = [p, cb = p->done.Callback()](const Status& s) { cb(s); };
  return req;
}

// Checks a completed tensor's result against its closed form.
inline void ExpectResult(const Planned& p, const std::string& where) {
  SCOPED_TRACE(where + " tensor '" + p.meta.name + "'");
  const DataType d = p.meta.dtype;
  const void* result = nullptr;
  switch (p.meta.kind) {
    case CollectiveKind::kBarrier: return;
    case CollectiveKind::kAllgather:
      EXPECT_EQ(p.gathered_shape, p.expected_shape);
      if (p.gathered.size() != p.expected.size() * DataTypeSize(d)) {
        ADD_FAILURE() << "gathered " << p.gathered.size() << " bytes";
        return;
      }
      result = p.gathered.data();
      break;
    default:
      result = p.in_place ? p.input.data() : p.output.data();
  }
  for (std::size_t i = 0; i < p.expected.size(); ++i) {
    const double got = LoadAs(d, result, i);
    const double allowed = p.tolerance * std::max(1.0, std::abs(p.expected[i]));
    if (!(std::abs(got - p.expected[i]) <= allowed)) {  // NaN fails too; report the first only
      ADD_FAILURE() << "element " << i << " of " << p.expected.size() << " is " << got
                    << ", expected " << p.expected[i];
      return;
    }
  }
}

// Enqueues the whole workload in an order shuffled by `seed`, waits for it
// (bounded), and checks every result.
inline void RunWorkload(Engine& engine, const Workload& work, unsigned seed,
                        const std::string& where) {
  std::vector<std::size_t> order(work.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  for (std::size_t i : order) {
    const Status s = engine.Enqueue(MakeRequest(work[i]));
    ASSERT_TRUE(s.ok()) << where << " enqueue '" << work[i]->meta.name << "': " << s.ToString();
  }
  const Deadline deadline = DeadlineIn();
  for (std::size_t i : order) {
    const Status s = Await(work[i]->done, where + " '" + work[i]->meta.name + "'", deadline);
    EXPECT_TRUE(s.ok()) << where << " '" << work[i]->meta.name << "': " << s.ToString();
    if (s.ok()) ExpectResult(*work[i], where);
  }
}

}  // namespace tfmpi::testing
