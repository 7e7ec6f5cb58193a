// ResponseCache: bits, replacement, LRU eviction and the generation counter
// (Note [Response cache] in engine/response_cache.h).
#include "tfmpi/engine/response_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "tfmpi/common/enforce.h"
#include "tfmpi/planning/negotiation.h"

namespace tfmpi {
namespace {

TensorMeta Meta(const std::string& name, Shape shape = {4}) {
  TensorMeta m;
  m.name = name;
  m.shape = std::move(shape);
  return m;
}

Response Ok(const std::string& name, Shape shape = {4}) {
  Response r;
  r.meta = Meta(name, std::move(shape));
  return r;
}

TEST(ResponseCache, PutThenLookupAndGet) {
  ResponseCache cache(4);
  EXPECT_FALSE(cache.Lookup(Meta("a"), 0).has_value());
  cache.Put(Ok("a"));
  cache.Put(Ok("b"));
  EXPECT_EQ(cache.size(), 2u);
  auto a = cache.Lookup(Meta("a"), 0), b = cache.Lookup(Meta("b"), 1);
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(b.has_value());
  EXPECT_NE(*a, *b);
  EXPECT_LT(*a, cache.capacity());
  EXPECT_LT(*b, cache.capacity());
  EXPECT_EQ(cache.Get(*a).meta, Meta("a"));
  EXPECT_EQ(cache.Get(*b).meta, Meta("b"));
  EXPECT_FALSE(cache.Lookup(Meta("a", {5}), 0).has_value()) << "other shape, same name";
  EXPECT_FALSE(cache.Lookup(Meta("c"), 0).has_value());
}

TEST(ResponseCache, ErrorResponsesAreNotCached) {
  ResponseCache cache(4);
  Response failed = Ok("a");
  failed.error = "ranks disagree";
  cache.Put(failed);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_FALSE(cache.Lookup(Meta("a"), 0).has_value());
}

TEST(ResponseCache, GetOfAnEmptyBitIsAnEnforceError) {
  ResponseCache cache(2);
  EXPECT_THROW(cache.Get(0), EnforceError);
  EXPECT_THROW(cache.Get(7), EnforceError);
}

TEST(ResponseCache, ReplacingANameKeepsItsBitAndBumpsTheGeneration) {
  ResponseCache cache(4);
  cache.Put(Ok("a", {4}));
  cache.Put(Ok("b"));
  const std::size_t bit = *cache.Lookup(Meta("a", {4}), 0);
  const std::uint64_t gen = cache.generation();
  cache.Put(Ok("a", {8}));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_NE(cache.generation(), gen);
  EXPECT_FALSE(cache.Lookup(Meta("a", {4}), 0).has_value()) << "old decision is gone";
  ASSERT_TRUE(cache.Lookup(Meta("a", {8}), 0).has_value());
  EXPECT_EQ(*cache.Lookup(Meta("a", {8}), 0), bit);
}

TEST(ResponseCache, InsertingIntoAFreeBitAndTouchingKeepTheGeneration) {
  ResponseCache cache(3);
  const std::uint64_t gen = cache.generation();
  cache.Put(Ok("a"));
  cache.Put(Ok("b"));
  cache.Touch(*cache.Lookup(Meta("a"), 0));
  EXPECT_EQ(cache.generation(), gen);
}

TEST(ResponseCache, EvictsTheLeastRecentlyPut) {
  ResponseCache cache(2);
  cache.Put(Ok("a"));
  cache.Put(Ok("b"));
  const std::size_t bit_a = *cache.Lookup(Meta("a"), 0);
  const std::uint64_t gen = cache.generation();
  cache.Put(Ok("c"));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_NE(cache.generation(), gen);
  EXPECT_FALSE(cache.Lookup(Meta("a"), 0).has_value());
  EXPECT_TRUE(cache.Lookup(Meta("b"), 0).has_value());
  ASSERT_TRUE(cache.Lookup(Meta("c"), 0).has_value());
  EXPECT_EQ(*cache.Lookup(Meta("c"), 0), bit_a) << "the newcomer takes the victim's bit";
}

TEST(ResponseCache, TouchProtectsFromEviction) {
  ResponseCache cache(2);
  cache.Put(Ok("a"));
  cache.Put(Ok("b"));
  cache.Touch(*cache.Lookup(Meta("a"), 0));  // b is now least recently used
  cache.Put(Ok("c"));
  EXPECT_TRUE(cache.Lookup(Meta("a"), 0).has_value());
  EXPECT_FALSE(cache.Lookup(Meta("b"), 0).has_value());
  EXPECT_TRUE(cache.Lookup(Meta("c"), 0).has_value());
}

TEST(ResponseCache, ReplacementCountsAsUse) {
  ResponseCache cache(2);
  cache.Put(Ok("a"));
  cache.Put(Ok("b"));
  cache.Put(Ok("a", {9}));  // a is most recent again
  cache.Put(Ok("c"));
  EXPECT_TRUE(cache.Lookup(Meta("a", {9}), 0).has_value());
  EXPECT_FALSE(cache.Lookup(Meta("b"), 0).has_value());
}

TEST(ResponseCache, CapacityZeroStoresNothing) {
  ResponseCache cache(0);
  const std::uint64_t gen = cache.generation();
  cache.Put(Ok("a"));
  cache.Put(Ok("a", {2}));
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.capacity(), 0u);
  EXPECT_FALSE(cache.Lookup(Meta("a"), 0).has_value());
  EXPECT_EQ(cache.generation(), gen);
}

TEST(ResponseCache, AllgatherLookupIsPerRank) {
  TensorMeta r0 = Meta("g", {2, 3}), r1 = Meta("g", {5, 3});
  r0.kind = r1.kind = CollectiveKind::kAllgather;
  ResponseCache cache(2);
  cache.Put(planning::DecideResponse({r0, r1}));
  EXPECT_TRUE(cache.Lookup(r0, 0).has_value());
  EXPECT_TRUE(cache.Lookup(r1, 1).has_value());
  EXPECT_FALSE(cache.Lookup(r1, 0).has_value());
  EXPECT_FALSE(cache.Lookup(r0, 1).has_value());
}

// Every rank holds its own cache and must agree on bits without talking: the
// same Put/Touch sequence has to give the same bits and evictions.
TEST(ResponseCache, SameSequenceGivesSameBitsEverywhere) {
  std::mt19937 rng(7);
  ResponseCache a(5), b(5);
  for (int step = 0; step < 2000; ++step) {
    const std::string name = "t" + std::to_string(rng() % 12);
    const Shape shape = {static_cast<std::int64_t>(1 + rng() % 2)};
    if (rng() % 3 == 0) {
      auto bit = a.Lookup(Meta(name, shape), 0);
      ASSERT_EQ(bit, b.Lookup(Meta(name, shape), 0));
      if (bit) {
        a.Touch(*bit);
        b.Touch(*bit);
      }
    } else {
      a.Put(Ok(name, shape));
      b.Put(Ok(name, shape));
    }
    ASSERT_LE(a.size(), 5u);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_EQ(a.generation(), b.generation());
    for (int n = 0; n < 12; ++n)
      for (std::int64_t d : {1, 2}) {
        const TensorMeta m = Meta("t" + std::to_string(n), {d});
        ASSERT_EQ(a.Lookup(m, 0), b.Lookup(m, 0)) << "step " << step;
      }
  }
}

// The LRU order against a simple reference model: a list of names, most recent first.
TEST(ResponseCache, EvictionMatchesAReferenceLru) {
  std::mt19937 rng(11);
  const std::size_t capacity = 4;
  ResponseCache cache(capacity);
  std::vector<std::string> model;  // front: most recent
  auto use = [&](const std::string& n) {
    model.erase(std::remove(model.begin(), model.end(), n), model.end());
    model.insert(model.begin(), n);
  };
  for (int step = 0; step < 3000; ++step) {
    const std::string name = "t" + std::to_string(rng() % 9);
    if (rng() % 2 == 0) {
      cache.Put(Ok(name));
      use(name);
      if (model.size() > capacity) model.pop_back();
    } else if (auto bit = cache.Lookup(Meta(name), 0)) {
      cache.Touch(*bit);
      use(name);
    }
    for (int n = 0; n < 9; ++n) {
      const std::string other = "t" + std::to_string(n);
      const bool in_model = std::find(model.begin(), model.end(), other) != model.end();
      ASSERT_EQ(cache.Lookup(Meta(other), 0).has_value(), in_model)
          << other << " at step " << step;
    }
  }
}

}  // namespace
}  // namespace tfmpi
