// NameSlots and PendingTable: one slot per name, reused across admissions,
// released exactly once, bounded when names never repeat (Note [Pending
// slots] in engine/name_slots.h).
#include "tfmpi/engine/name_slots.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <string>
#include <vector>

#include "tfmpi/engine/pending_table.h"

namespace tfmpi {
namespace {

Request Named(const std::string& name, int* done_calls = nullptr) {
  Request r;
  r.meta.name = name;
  r.meta.shape = {4};
  if (done_calls) r.done = [done_calls](const Status&) { ++*done_calls; };
  return r;
}

TEST(NameSlots, ANameInFlightIsRefusedUntilItsRequestCompletes) {
  NameSlots names;
  Request first = Named("w");
  ASSERT_TRUE(names.Admit(&first));
  Request second = Named("w");
  EXPECT_FALSE(names.Admit(&second));
  EXPECT_EQ(second.hold.slot, nullptr);
  EXPECT_EQ(names.Find("w"), first.hold.slot);
  ASSERT_TRUE(Complete(first, Status::Ok()).ok());
  EXPECT_EQ(names.Find("w"), nullptr);
  EXPECT_TRUE(names.Admit(&second));
  EXPECT_NE(second.hold.slot, nullptr);
}

TEST(NameSlots, ASlotIsReusedByTheNextRequestOfItsName) {
  NameSlots names;
  Request a = Named("grad/0");
  ASSERT_TRUE(names.Admit(&a));
  NameSlot* slot = a.hold.slot;
  ASSERT_TRUE(Complete(a, Status::Ok()).ok());
  Request b = Named("grad/0"), c = Named("grad/1");
  ASSERT_TRUE(names.Admit(&b));
  ASSERT_TRUE(names.Admit(&c));
  EXPECT_EQ(b.hold.slot, slot);
  EXPECT_NE(c.hold.slot, slot);
  EXPECT_EQ(names.size(), 2u);
}

// Only one request can release an admission: a moved-from request and a copy
// hold nothing, and a release of an older admission leaves a newer one alone.
TEST(NameSlots, OnlyTheRequestThatHoldsTheNameReleasesIt) {
  NameSlots names;
  Request a = Named("w");
  ASSERT_TRUE(names.Admit(&a));
  Request copy = a;
  EXPECT_EQ(copy.hold.slot, nullptr);
  Request moved = std::move(a);
  EXPECT_EQ(a.hold.slot, nullptr);  // NOLINT(bugprone-use-after-move): the point of the test
  ASSERT_TRUE(Complete(copy, Status::Ok()).ok());
  ASSERT_TRUE(Complete(a, Status::Ok()).ok());
  Request b = Named("w");
  EXPECT_FALSE(names.Admit(&b));  // still held by `moved`
  NameSlot* slot = moved.hold.slot;
  const std::uint64_t first = moved.hold.admission;
  ASSERT_TRUE(Complete(moved, Status::Ok()).ok());
  ASSERT_TRUE(names.Admit(&b));
  names.Release(slot, first);  // a late release of the first admission
  Request c = Named("w");
  EXPECT_FALSE(names.Admit(&c));
  EXPECT_NE(names.Find("w"), nullptr);
}

// Threads admitting and completing their own names while others churn
// through fresh names (run under ThreadSanitizer by scripts/sanitizers.sh).
TEST(NameSlots, ConcurrentAdmissionsAndReleases) {
  NameSlots names;
  std::vector<std::thread> threads;
  std::atomic<int> refused{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3000; ++i) {
        Request r = Named(t % 2 ? "shared/" + std::to_string(i % 7) : "t" + std::to_string(t) + "/" + std::to_string(i));
        if (!names.Admit(&r)) {
          ++refused;
          continue;
        }
        ASSERT_TRUE(Complete(r, Status::Ok()).ok());
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int i = 0; i < 7; ++i) EXPECT_EQ(names.Find("shared/" + std::to_string(i)), nullptr);
  EXPECT_LE(names.size(), 4200u);
  EXPECT_LE(refused.load(), 6000);
}

TEST(NameSlots, CompleteReleasesTheNameBeforeTheCallbackRuns) {
  NameSlots names;
  Request a = Named("w");
  bool admitted_inside = false;
  a.done = [&](const Status&) {
    Request again = Named("w");
    admitted_inside = names.Admit(&again);
  };
  ASSERT_TRUE(names.Admit(&a));
  ASSERT_TRUE(Complete(a, Status::Ok()).ok());
  EXPECT_TRUE(admitted_inside);
}

// A program that gives every collective a new name: idle slots are dropped,
// names in flight never are.
TEST(NameSlots, SlotsStayBoundedWhenNamesNeverRepeat) {
  NameSlots names;
  std::vector<Request> held;
  for (int i = 0; i < 10; ++i) {
    held.push_back(Named("held/" + std::to_string(i)));
    ASSERT_TRUE(names.Admit(&held.back()));
  }
  std::size_t most = 0;
  for (int i = 0; i < 20000; ++i) {
    Request r = Named("once/" + std::to_string(i));
    ASSERT_TRUE(names.Admit(&r));
    ASSERT_TRUE(Complete(r, Status::Ok()).ok());
    most = std::max(most, names.size());
  }
  EXPECT_LE(most, 4200u);
  for (Request& r : held) {
    EXPECT_EQ(names.Find(r.meta.name), r.hold.slot) << r.meta.name;
    Request again = Named(r.meta.name);
    EXPECT_FALSE(names.Admit(&again)) << r.meta.name;
  }
}

TEST(PendingTable, AddTakeAndTakeAll) {
  NameSlots names;
  PendingTable pending(&names);
  std::vector<NameSlot*> slots;
  int done_calls = 0;
  for (const char* n : {"a", "b", "c", "d"}) {
    Request r = Named(n, &done_calls);
    ASSERT_TRUE(names.Admit(&r));
    slots.push_back(r.hold.slot);
    pending.Add(std::move(r));
  }
  EXPECT_EQ(pending.size(), 4u);
  EXPECT_EQ(pending.FindByName("b"), slots[1]);
  std::optional<Request> b = pending.Take(slots[1]);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->meta.name, "b");
  EXPECT_FALSE(pending.Take(slots[1]).has_value());  // no longer pending
  EXPECT_EQ(pending.FindByName("b"), nullptr);       // in flight, but not pending
  std::vector<std::string> seen;
  pending.ForEach([&](const NameSlot& s) { seen.push_back(s.name); });
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "c", "d"}));
  std::vector<Request> rest = pending.TakeAll();
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(rest.size(), 3u);
  for (Request& r : rest) ASSERT_TRUE(Complete(r, Status::Ok()).ok());
  ASSERT_TRUE(Complete(*b, Status::Ok()).ok());
  EXPECT_EQ(done_calls, 4);
  for (const char* n : {"a", "b", "c", "d"}) EXPECT_EQ(names.Find(n), nullptr) << n;
}

}  // namespace
}  // namespace tfmpi
