// planning::DecideResponse and MatchesCachedResponse: the coordinator's
// decision about one tensor from every rank's description of it.
#include "tfmpi/planning/negotiation.h"

#include <gtest/gtest.h>
#include "contains.h"

namespace tfmpi::planning {
namespace {

using testing::Contains;


TensorMeta Meta(CollectiveKind kind, DataType dtype, Shape shape, ReduceOp op = ReduceOp::kSum,
                int root = 0, std::string name = "layer1/weights") {
  TensorMeta m;
  m.name = std::move(name);
  m.kind = kind;
  m.dtype = dtype;
  m.op = op;
  m.root = root;
  m.shape = std::move(shape);
  return m;
}

TensorMeta AllreduceMeta(Shape shape = {2, 3}) {
  return Meta(CollectiveKind::kAllreduce, DataType::kFloat32, std::move(shape));
}

TensorMeta GatherMeta(Shape shape) {
  return Meta(CollectiveKind::kAllgather, DataType::kInt32, std::move(shape));
}

TEST(DecideResponse, AgreementOnEveryKindIsOk) {
  for (CollectiveKind kind : {CollectiveKind::kAllreduce, CollectiveKind::kBroadcast,
                              CollectiveKind::kAllgather, CollectiveKind::kBarrier,
                              CollectiveKind::kReduce}) {
    for (int size : {1, 2, 5}) {
      const TensorMeta m = Meta(kind, DataType::kFloat64, {4, 2}, ReduceOp::kMax, 0);
      const Response r = DecideResponse(std::vector<TensorMeta>(size, m));
      EXPECT_TRUE(r.ok()) << CollectiveKindName(kind) << " x" << size << ": " << r.error;
      EXPECT_EQ(r.meta, m);
      if (kind == CollectiveKind::kAllgather)
        EXPECT_EQ(r.first_dims, std::vector<std::int64_t>(size, 4));
      else
        EXPECT_TRUE(r.first_dims.empty());
    }
  }
}

TEST(DecideResponse, ShapeMismatchNamesTensorAndRanks) {
  const Response r = DecideResponse({AllreduceMeta({2, 3}), AllreduceMeta({3, 2}),
                                     AllreduceMeta({2, 3})});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.error, {"'layer1/weights'", "shape", "ranks 0, 2 have [2, 3]",
                                 "rank 1 has [3, 2]"}));
}

TEST(DecideResponse, EveryDistinctValueIsListedWithItsRanks) {
  const Response r = DecideResponse(
      {AllreduceMeta({1}), AllreduceMeta({2}), AllreduceMeta({3}), AllreduceMeta({1})});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.error, {"ranks 0, 3 have [1]; rank 1 has [2]; rank 2 has [3]"}));
}

TEST(DecideResponse, DtypeMismatch) {
  TensorMeta odd = AllreduceMeta();
  odd.dtype = DataType::kFloat16;
  const Response r = DecideResponse({AllreduceMeta(), AllreduceMeta(), odd});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.error, {"'layer1/weights'", "dtype", "ranks 0, 1 have float32",
                                 "rank 2 has float16"}));
}

TEST(DecideResponse, ReduceOpMismatch) {
  TensorMeta odd = AllreduceMeta();
  odd.op = ReduceOp::kMax;
  const Response r = DecideResponse({odd, AllreduceMeta()});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.error, {"'layer1/weights'", "rank 0 has max", "rank 1 has sum"}));
}

TEST(DecideResponse, BroadcastRootMismatch) {
  const TensorMeta a = Meta(CollectiveKind::kBroadcast, DataType::kInt64, {5}, ReduceOp::kSum, 0);
  const TensorMeta b = Meta(CollectiveKind::kBroadcast, DataType::kInt64, {5}, ReduceOp::kSum, 2);
  const Response r = DecideResponse({a, a, b});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(
      Contains(r.error, {"'layer1/weights'", "ranks 0, 1 have root 0", "rank 2 has root 2"}));
}

TEST(DecideResponse, ReduceRootAndOpMismatch) {
  const TensorMeta a = Meta(CollectiveKind::kReduce, DataType::kFloat32, {5}, ReduceOp::kSum, 1);
  TensorMeta b = a;
  b.root = 0;
  Response r = DecideResponse({a, b});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.error, {"'layer1/weights'", "rank 0 has root 1", "rank 1 has root 0"}));
  b = a;
  b.op = ReduceOp::kMax;
  r = DecideResponse({a, b});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.error, {"rank 0 has sum", "rank 1 has max"}));
  b = a;
  b.shape = {6};
  r = DecideResponse({a, b});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.error, {"rank 0 has [5]", "rank 1 has [6]"}));
}

TEST(DecideResponse, BroadcastShapeMismatch) {
  const TensorMeta a = Meta(CollectiveKind::kBroadcast, DataType::kInt64, {5});
  const TensorMeta b = Meta(CollectiveKind::kBroadcast, DataType::kInt64, {6});
  const Response r = DecideResponse({a, b});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.error, {"rank 0 has [5]", "rank 1 has [6]"}));
}

TEST(DecideResponse, KindMismatch) {
  const Response r = DecideResponse({AllreduceMeta(), GatherMeta({2, 3})});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(
      Contains(r.error, {"'layer1/weights'", "rank 0 has allreduce", "rank 1 has allgather"}));
}

TEST(DecideResponse, AllgatherAcceptsDifferentFirstDimensions) {
  const Response r =
      DecideResponse({GatherMeta({2, 3}), GatherMeta({0, 3}), GatherMeta({5, 3})});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.first_dims, (std::vector<std::int64_t>{2, 0, 5}));
  EXPECT_EQ(r.meta.kind, CollectiveKind::kAllgather);
}

TEST(DecideResponse, AllgatherRejectsDifferentTrailingDimensions) {
  const Response r =
      DecideResponse({GatherMeta({2, 3}), GatherMeta({2, 3}), GatherMeta({2, 4})});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.error, {"'layer1/weights'", "after the first", "ranks 0, 1 have",
                                 "rank 2 has", "[4]"}));
}

TEST(DecideResponse, AllgatherRejectsDifferentNumberOfDimensions) {
  const Response r = DecideResponse({GatherMeta({2, 3}), GatherMeta({6})});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.error, {"number of dimensions", "rank 1 has"}));
}

TEST(DecideResponse, BarrierIgnoresShape) {
  TensorMeta a = Meta(CollectiveKind::kBarrier, DataType::kFloat32, {});
  TensorMeta b = a;
  b.shape = {7};
  EXPECT_TRUE(DecideResponse({a, b}).ok());
}

TEST(MatchesCachedResponse, SameMetaMatches) {
  const Response cached = DecideResponse({AllreduceMeta(), AllreduceMeta()});
  EXPECT_TRUE(MatchesCachedResponse(AllreduceMeta(), 0, cached));
  EXPECT_TRUE(MatchesCachedResponse(AllreduceMeta(), 1, cached));
}

TEST(MatchesCachedResponse, AnyDifferenceMisses) {
  const Response cached = DecideResponse({AllreduceMeta(), AllreduceMeta()});
  TensorMeta m = AllreduceMeta({3, 2});
  EXPECT_FALSE(MatchesCachedResponse(m, 0, cached));
  m = AllreduceMeta();
  m.dtype = DataType::kFloat64;
  EXPECT_FALSE(MatchesCachedResponse(m, 0, cached));
  m = AllreduceMeta();
  m.op = ReduceOp::kMin;
  EXPECT_FALSE(MatchesCachedResponse(m, 0, cached));
  m = AllreduceMeta();
  m.name = "other";
  EXPECT_FALSE(MatchesCachedResponse(m, 0, cached));
}

TEST(MatchesCachedResponse, ErrorResponsesNeverMatch) {
  const Response failed = DecideResponse({AllreduceMeta({2}), AllreduceMeta({3})});
  ASSERT_FALSE(failed.ok());
  EXPECT_FALSE(MatchesCachedResponse(AllreduceMeta({2}), 0, failed));
}

TEST(MatchesCachedResponse, AllgatherChecksThisRanksFirstDimension) {
  const Response cached = DecideResponse({GatherMeta({2, 3}), GatherMeta({0, 3})});
  ASSERT_TRUE(cached.ok());
  EXPECT_TRUE(MatchesCachedResponse(GatherMeta({2, 3}), 0, cached));
  EXPECT_TRUE(MatchesCachedResponse(GatherMeta({0, 3}), 1, cached));
  EXPECT_FALSE(MatchesCachedResponse(GatherMeta({0, 3}), 0, cached)) << "rank 0 had 2 rows";
  EXPECT_FALSE(MatchesCachedResponse(GatherMeta({2, 3}), 1, cached)) << "rank 1 had 0 rows";
  EXPECT_FALSE(MatchesCachedResponse(GatherMeta({2, 4}), 0, cached)) << "trailing dims differ";
  EXPECT_FALSE(MatchesCachedResponse(GatherMeta({2, 3, 1}), 0, cached)) << "ndims differ";
  EXPECT_FALSE(MatchesCachedResponse(GatherMeta({2, 3}), 2, cached)) << "rank not in decision";
  TensorMeta other_dtype = GatherMeta({2, 3});
  other_dtype.dtype = DataType::kFloat32;
  EXPECT_FALSE(MatchesCachedResponse(other_dtype, 0, cached));
}

}  // namespace
}  // namespace tfmpi::planning
