// planning::PlanFusion: which ready tensors share one collective
// (Note [Fusion rules] in planning/fusion.h).
#include "tfmpi/planning/fusion.h"

#include <gtest/gtest.h>

#include <random>
#include <tuple>

namespace tfmpi::planning {
namespace {

using Groups = std::vector<std::vector<std::size_t>>;

FusionItem Allreduce(std::size_t bytes, DataType dtype = DataType::kFloat32,
                     ReduceOp op = ReduceOp::kSum) {
  FusionItem it;
  it.kind = CollectiveKind::kAllreduce;
  it.dtype = dtype;
  it.op = op;
  it.bytes = bytes;
  return it;
}

FusionItem Broadcast(std::size_t bytes, int root, DataType dtype = DataType::kFloat32) {
  FusionItem it;
  it.kind = CollectiveKind::kBroadcast;
  it.dtype = dtype;
  it.root = root;
  it.bytes = bytes;
  return it;
}

FusionItem Of(CollectiveKind kind, std::size_t bytes) {
  FusionItem it;
  it.kind = kind;
  it.bytes = bytes;
  return it;
}

FusionOptions Thresholds(std::size_t fusion, std::size_t direct) {
  FusionOptions o;
  o.fusion_threshold = fusion;
  o.direct_threshold = direct;
  return o;
}

// The tuple a group must agree on: kind, dtype, and op (allreduce, reduce);
// never the root.
std::tuple<int, int, int> KeyOf(const FusionItem& it) {
  return {static_cast<int>(it.kind), static_cast<int>(it.dtype),
          it.kind == CollectiveKind::kBroadcast ? -1 : static_cast<int>(it.op)};
}

TEST(PlanFusion, EmptyInputGivesNoGroups) {
  EXPECT_TRUE(PlanFusion({}, FusionOptions{}).empty());
}

TEST(PlanFusion, SameDtypeAndOpFuseIntoOneGroup) {
  EXPECT_EQ(PlanFusion({Allreduce(4), Allreduce(8), Allreduce(16)}, FusionOptions{}),
            (Groups{{0, 1, 2}}));
}

TEST(PlanFusion, DifferentOpDtypeOrKindDoNotFuse) {
  const std::vector<FusionItem> items = {
      Allreduce(4, DataType::kFloat32, ReduceOp::kSum),   // 0
      Allreduce(4, DataType::kFloat32, ReduceOp::kMax),   // 1
      Allreduce(4, DataType::kFloat64, ReduceOp::kSum),   // 2
      Broadcast(4, 0, DataType::kFloat32),                // 3
      Allreduce(4, DataType::kFloat32, ReduceOp::kSum),   // 4 joins 0
      Allreduce(4, DataType::kFloat32, ReduceOp::kMax),   // 5 joins 1
      Broadcast(4, 0, DataType::kFloat32),                // 6 joins 3
  };
  EXPECT_EQ(PlanFusion(items, FusionOptions{}), (Groups{{0, 4}, {1, 5}, {2}, {3, 6}}));
}

TEST(PlanFusion, BroadcastsOfSeveralRootsFuseAndIgnoreOp) {
  FusionItem a = Broadcast(4, 1), b = Broadcast(4, 2), c = Broadcast(4, 1);
  c.op = ReduceOp::kMax;  // meaningless for a broadcast: must not split the group
  EXPECT_EQ(PlanFusion({a, b, c}, FusionOptions{}), (Groups{{0, 1, 2}}));
}

TEST(PlanFusion, ReducesOfSeveralRootsFuseByOpNotWithAllreduces) {
  FusionItem a = Of(CollectiveKind::kReduce, 4), b = Of(CollectiveKind::kReduce, 4),
             c = Of(CollectiveKind::kReduce, 4), d = Allreduce(4);
  b.root = 1;
  c.op = ReduceOp::kMax;
  EXPECT_EQ(PlanFusion({a, b, c, d}, FusionOptions{}), (Groups{{0, 1}, {2}, {3}}));
}

TEST(PlanFusion, AllreducesIgnoreRoot) {
  FusionItem a = Allreduce(4), b = Allreduce(4);
  b.root = 3;
  EXPECT_EQ(PlanFusion({a, b}, FusionOptions{}), (Groups{{0, 1}}));
}

TEST(PlanFusion, AllgatherBarrierAndErrorsRunAlone) {
  FusionItem err1 = Allreduce(4), err2 = Allreduce(4);
  err1.error = err2.error = true;
  const std::vector<FusionItem> items = {
      Of(CollectiveKind::kAllgather, 4), Of(CollectiveKind::kAllgather, 4),
      Of(CollectiveKind::kBarrier, 0),   Of(CollectiveKind::kBarrier, 0),
      err1, err2, Allreduce(4)};
  EXPECT_EQ(PlanFusion(items, FusionOptions{}), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}}));
}

TEST(PlanFusion, BucketsFillInArrivalOrderUpToTheThreshold) {
  // 40 + 40 fits 100; the third 40 opens a new bucket, which the 20 then joins.
  EXPECT_EQ(PlanFusion({Allreduce(40), Allreduce(40), Allreduce(40), Allreduce(20)},
                         Thresholds(100, 1000)), (Groups{{0, 1}, {2, 3}}));
}

TEST(PlanFusion, ExactlyFullBucketIsAllowed) {
  EXPECT_EQ(PlanFusion({Allreduce(60), Allreduce(40), Allreduce(1)}, Thresholds(100, 1000)),
            (Groups{{0, 1}, {2}}));
}

TEST(PlanFusion, TensorsAtOrAboveDirectThresholdRunAlone) {
  EXPECT_EQ(PlanFusion({Allreduce(99), Allreduce(100), Allreduce(1), Allreduce(500),
                          Allreduce(2)},
                         Thresholds(1000, 100)), (Groups{{0, 2, 4}, {1}, {3}}));
}

TEST(PlanFusion, TensorLargerThanFusionThresholdRunsAlone) {
  EXPECT_EQ(PlanFusion({Allreduce(10), Allreduce(300), Allreduce(10)}, Thresholds(100, 1000)),
            (Groups{{0, 2}, {1}}));
}

TEST(PlanFusion, ZeroFusionThresholdDisablesFusionOfNonEmptyTensors) {
  EXPECT_EQ(PlanFusion({Allreduce(4), Allreduce(4), Broadcast(4, 0), Broadcast(4, 0)},
                         Thresholds(0, 1000)), (Groups{{0}, {1}, {2}, {3}}));
}

TEST(PlanFusion, ZeroLengthTensorsArePlannedWithoutBreakingBuckets) {
  // Empty tensors weigh nothing: they join the open bucket without pushing it over.
  EXPECT_EQ(PlanFusion({Allreduce(50), Allreduce(0), Allreduce(50), Allreduce(0),
                          Allreduce(1)},
                         Thresholds(100, 1000)), (Groups{{0, 1, 2, 3}, {4}}));
  EXPECT_EQ(PlanFusion({Of(CollectiveKind::kAllgather, 0), Allreduce(0)}, FusionOptions{}),
            (Groups{{0}, {1}}));
}

// Random ready lists: every invariant of Note [Fusion rules] at once.
TEST(PlanFusion, RandomInputsSatisfyEveryRule) {
  std::mt19937 rng(20240611);
  const CollectiveKind kinds[] = {CollectiveKind::kAllreduce, CollectiveKind::kReduce,
                                  CollectiveKind::kBroadcast, CollectiveKind::kAllgather,
                                  CollectiveKind::kBarrier};
  for (int trial = 0; trial < 300; ++trial) {
    const FusionOptions opts = Thresholds(std::uniform_int_distribution<std::size_t>(0, 256)(rng),
                                          std::uniform_int_distribution<std::size_t>(0, 200)(rng));
    std::vector<FusionItem> items(std::uniform_int_distribution<std::size_t>(0, 40)(rng));
    for (FusionItem& it : items) {
      it.kind = kinds[rng() % 5];
      it.dtype = kAllDataTypes[rng() % 3];
      it.op = kAllReduceOps[rng() % 3];
      it.root = static_cast<int>(rng() % 3);
      it.bytes = rng() % 4 == 0 ? 0 : std::uniform_int_distribution<std::size_t>(1, 300)(rng);
      it.error = rng() % 10 == 0;
    }
    const Groups groups = PlanFusion(items, opts);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ", fusion " << opts.fusion_threshold
                                      << ", direct " << opts.direct_threshold);

    std::vector<int> seen(items.size(), 0);
    std::size_t previous_first = 0;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const auto& group = groups[g];
      ASSERT_FALSE(group.empty());
      if (g > 0) {
        EXPECT_GT(group.front(), previous_first) << "groups ordered by first member";
      }
      previous_first = group.front();
      std::size_t bytes = 0;
      for (std::size_t k = 0; k < group.size(); ++k) {
        ASSERT_LT(group[k], items.size());
        ++seen[group[k]];
        bytes += items[group[k]].bytes;
        if (k > 0) {
          EXPECT_GT(group[k], group[k - 1]) << "members in arrival order";
          EXPECT_EQ(KeyOf(items[group[k]]), KeyOf(items[group.front()]));
        }
      }
      if (group.size() > 1) {
        EXPECT_LE(bytes, opts.fusion_threshold);
        for (std::size_t i : group) {
          const FusionItem& it = items[i];
          EXPECT_FALSE(it.error);
          EXPECT_TRUE(it.kind == CollectiveKind::kAllreduce ||
                      it.kind == CollectiveKind::kBroadcast || it.kind == CollectiveKind::kReduce);
          EXPECT_LT(it.bytes, opts.direct_threshold);
        }
      }
    }
    for (std::size_t i = 0; i < items.size(); ++i) EXPECT_EQ(seen[i], 1) << "item " << i;
    EXPECT_EQ(PlanFusion(items, opts), groups) << "deterministic";
  }
}

}  // namespace
}  // namespace tfmpi::planning
