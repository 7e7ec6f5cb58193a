// NameSlots and PendingTable: one slot per name, reused across admissions,
// released exactly once, bounded when names never repeat (Note [Pending
// slots] in engine/name_slots.h).
#include "tfmpi/engine/name_slots.h"

#include <gtest/gtest.h>

#include <algorithm>
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
  EXPECT_EQ(second.slot, nullptr);
  EXPECT_EQ(names.Find("w"), first.slot);
  ASSERT_TRUE(Complete(first, Status::Ok()).ok());
  EXPECT_EQ(names.Find("w"), nullptr);
  EXPECT_TRUE(names.Admit(&second));
  EXPECT_NE(second.slot, nullptr);
}

TEST(NameSlots, ASlotIsReusedByTheNextRequestOfItsName) {
  NameSlots names;
  Request a = Named("grad/0");
  ASSERT_TRUE(names.Admit(&a));
  NameSlot* slot = a.slot;
  ASSERT_TRUE(Complete(a, Status::Ok()).ok());
  Request b = Named("grad/0"), c = Named("grad/1");
  ASSERT_TRUE(names.Admit(&b));
  ASSERT_TRUE(names.Admit(&c));
  EXPECT_EQ(b.slot, slot);
  EXPECT_NE(c.slot, slot);
  EXPECT_EQ(names.size(), 2u);
}

// A second Complete() of a request (or of a stray copy of it) must not
// release a later admission of the same name.
TEST(NameSlots, AStaleReleaseLeavesALaterAdmissionInFlight) {
  NameSlots names;
  Request a = Named("w");
  ASSERT_TRUE(names.Admit(&a));
  Request copy = a;
  ASSERT_TRUE(Complete(a, Status::Ok()).ok());
  Request b = Named("w");
  ASSERT_TRUE(names.Admit(&b));
  ASSERT_TRUE(Complete(copy, Status::Ok()).ok());  // releases admission 1 again: ignored
  Request c = Named("w");
  EXPECT_FALSE(names.Admit(&c));
  EXPECT_NE(names.Find("w"), nullptr);
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
    EXPECT_EQ(names.Find(r.meta.name), r.slot) << r.meta.name;
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
    slots.push_back(r.slot);
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
