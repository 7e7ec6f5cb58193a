#include "tfmpi/engine/request.h"

#include <fmt/format.h>

#include "tfmpi/engine/name_slots.h"

namespace tfmpi {

Status Complete(Request& request, const Status& status) {
  if (request.hold.slot) {
    NameHold hold = std::move(request.hold);
    hold.slot->owner->Release(hold.slot, hold.admission);
  }
  DoneCallback done = std::move(request.done);
  request.done = nullptr;
  if (!done) return Status::Ok();
  try {
    done(status);
  } catch (...) {
    return StatusFromCurrentException(
        fmt::format("the completion callback of tensor '{}' threw", request.meta.name));
  }
  return Status::Ok();
}

}  // namespace tfmpi
