// NameSlots: one slot per request name, shared by the threads that submit
// requests and the engine thread.
//
// Note [Pending slots]
// A training step submits the same names every step. Admission (on the
// submitting thread) must look the name up anyway, to refuse a second
// request of a name that is still in flight; it finds or creates the name's
// slot there and hands it to the engine inside the request (Request::hold).
// The engine thread then keeps its per-name state in the slot: the pending
// request, whether it was reported to the coordinator, and the response-cache
// bit it matched last time (checked against that entry instead of looked up
// again: Negotiator::Negotiate). So in steady state the engine thread hashes
// no name and allocates nothing per request; with 1,000 cached tensors per
// cycle, negotiation went from about 0.15 to 0.06 µs per tensor of CPU
// (docs/performance.md, "Negotiation cost").
//
// Threads. The map and `in_flight` are guarded by the mutex; the rest of a
// slot belongs to the engine thread from the request's admission until it is
// completed. Complete() releases the name last thing before the caller's
// callback, after the engine took the request out of its pending table, so a
// later admission of the name (which the mutex orders after the release) is
// the next use of the slot. Slots whose names stopped coming are dropped
// under the mutex (at an admission, so under the engine's own mutex too) once
// there are more than 4,096 of them and four times as many as names in
// flight, so a program that names every collective anew keeps a bounded map.
// A program whose recurring names outnumber that (more than 4,096 names, few
// in flight at once) loses its idle slots every few thousand admissions and
// pays one allocation and cache lookup per name after each drop.
#pragma once

#include <tsl/robin_map.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "tfmpi/engine/request.h"

namespace tfmpi {

class NameSlots;

struct PendingRequest {
  Request request;
  bool reported = false;             // sent to the coordinator
  bool served = false;               // decided from the cache in the current cycle
  std::optional<std::size_t> bit;    // cache bit, valid while bit_generation matches
  std::uint64_t bit_generation = ~std::uint64_t{0};
  std::uint64_t bit_checked_for = 0;  // the admission `bit` was looked up or checked for
};

struct NameSlot {
  static constexpr std::size_t kNotPending = ~std::size_t{0};
  // Set at creation, then read-only.
  std::string name;
  NameSlots* owner = nullptr;
  // Guarded by owner's mutex.
  bool in_flight = false;
  std::uint64_t admissions = 0;  // which admission a request's release refers to
  // The engine thread's, while a request of this name is in flight.
  PendingRequest entry;
  std::size_t index = kNotPending;  // position in PendingTable's list of pending requests
};

class NameSlots {
 public:
  // Marks `request`'s name in flight and attaches its slot (request->hold).
  // False if a request of that name is in flight.
  bool Admit(Request* request);
  // Ends an admission: called by Complete() (Note [Pending slots]).
  void Release(NameSlot* slot, std::uint64_t admission);
  // The slot of a name in flight, or nullptr.
  NameSlot* Find(const std::string& name);

  std::size_t size();  // slots kept, for tests

 private:
  void DropIdleSlots();  // mu_ held

  struct Hasher {
    std::size_t operator()(const std::string& s) const { return std::hash<std::string>{}(s); }
  };
  std::mutex mu_;
  std::size_t in_flight_ = 0;
  tsl::robin_map<std::string, std::unique_ptr<NameSlot>, Hasher, std::equal_to<std::string>,
                 std::allocator<std::pair<std::string, std::unique_ptr<NameSlot>>>,
                 /*StoreHash=*/true>
      slots_;  // slots stay put when the map moves its entries
};

}  // namespace tfmpi
