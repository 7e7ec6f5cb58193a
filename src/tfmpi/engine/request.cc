#include "tfmpi/engine/request.h"

#include <fmt/format.h>

namespace tfmpi {

std::string DescribeMeta(const TensorMeta& meta) {
  std::string what = CollectiveKindName(meta.kind);
  if (meta.kind == CollectiveKind::kAllreduce) what += fmt::format("({})", ReduceOpName(meta.op));
  if (meta.kind == CollectiveKind::kBroadcast) what += fmt::format("(root {})", meta.root);
  if (meta.kind == CollectiveKind::kBarrier) return what;
  return fmt::format("{} {}{}", what, DataTypeName(meta.dtype), ShapeToString(meta.shape));
}

Status Complete(Request& request, const Status& status) {
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
