#include "tfmpi/engine/pending_table.h"

#include "tfmpi/common/enforce.h"

namespace tfmpi {

void PendingTable::Add(Request request) {
  NameSlot* s = request.hold.slot;
  TFMPI_ENFORCE(s != nullptr, "request '{}' was not admitted", request.meta.name);
  TFMPI_ENFORCE(s->index == NameSlot::kNotPending, "a request named '{}' is already pending",
                s->name);
  PendingRequest& p = s->entry;
  p.request = std::move(request);
  p.reported = false;
  p.served = false;
  s->index = live_.size();
  live_.push_back(s);
}

NameSlot* PendingTable::FindByName(const std::string& name) {
  NameSlot* s = names_->Find(name);
  return s && s->index != NameSlot::kNotPending ? s : nullptr;
}

std::optional<Request> PendingTable::Take(NameSlot* s) {
  if (!s || s->index == NameSlot::kNotPending) return std::nullopt;
  Unlink(s);
  return std::move(s->entry.request);
}

std::vector<Request> PendingTable::TakeAll() {
  std::vector<Request> all;
  all.reserve(live_.size());
  for (NameSlot* s : live_) {
    s->index = NameSlot::kNotPending;
    all.push_back(std::move(s->entry.request));
  }
  live_.clear();
  return all;
}

void PendingTable::Unlink(NameSlot* s) {
  NameSlot* last = live_.back();
  live_[s->index] = last;
  last->index = s->index;
  live_.pop_back();
  s->index = NameSlot::kNotPending;
}

}  // namespace tfmpi
