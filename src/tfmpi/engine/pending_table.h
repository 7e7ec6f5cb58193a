// PendingTable: the engine thread's list of this rank's requests that wait
// for a decision, kept in their names' slots (Note [Pending slots],
// name_slots.h). Order: none in particular (rank 0 decides the execution
// order and broadcasts it).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tfmpi/engine/name_slots.h"
#include "tfmpi/engine/request.h"

namespace tfmpi {

class PendingTable {
 public:
  explicit PendingTable(NameSlots* names) : names_(names) {}

  // Adds an admitted request (request.hold set); its name must not be pending.
  void Add(Request request);
  // The slot of a pending request of that name, or nullptr (a lookup under
  // the name map's mutex: for the rare paths that know only the name).
  NameSlot* FindByName(const std::string& name);
  // Removes the request pending in `slot` and returns it (nullopt if none).
  std::optional<Request> Take(NameSlot* slot);
  // Removes and returns every pending request.
  std::vector<Request> TakeAll();

  bool empty() const { return live_.empty(); }
  std::size_t size() const { return live_.size(); }

  template <typename F>  // f(NameSlot& slot): slot.name, slot.entry
  void ForEach(F&& f) const {
    for (NameSlot* s : live_) f(*s);
  }

 private:
  void Unlink(NameSlot* s);

  NameSlots* names_;
  std::vector<NameSlot*> live_;
};

}  // namespace tfmpi
