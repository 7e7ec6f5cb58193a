#include "tfmpi/engine/name_slots.h"

namespace tfmpi {
namespace {
// Idle slots are dropped when the map holds more than this many slots and
// more than kIdleFactor per name in flight (Note [Pending slots]).
constexpr std::size_t kMinSlotsKept = 4096;
constexpr std::size_t kIdleFactor = 4;
}  // namespace

bool NameSlots::Admit(Request* request) {
  std::lock_guard<std::mutex> lock(mu_);
  if (slots_.size() > kMinSlotsKept && slots_.size() > kIdleFactor * (in_flight_ + 1))
    DropIdleSlots();
  auto it = slots_.find(request->meta.name);
  if (it == slots_.end()) {
    auto slot = std::make_unique<NameSlot>();
    slot->name = request->meta.name;
    slot->owner = this;
    it = slots_.insert({request->meta.name, std::move(slot)}).first;
  }
  NameSlot* slot = it->second.get();
  if (slot->in_flight) return false;
  slot->in_flight = true;
  ++in_flight_;
  request->hold = NameHold(slot, ++slot->admissions);
  return true;
}

void NameSlots::Release(NameSlot* slot, std::uint64_t admission) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!slot->in_flight || slot->admissions != admission) return;  // released already
  slot->in_flight = false;
  --in_flight_;
}

NameSlot* NameSlots::Find(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(name);
  if (it == slots_.end() || !it->second->in_flight) return nullptr;
  return it->second.get();
}

std::size_t NameSlots::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_.size();
}

void NameSlots::DropIdleSlots() {
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (it->second->in_flight) ++it;
    else it = slots_.erase(it);
  }
}

}  // namespace tfmpi
