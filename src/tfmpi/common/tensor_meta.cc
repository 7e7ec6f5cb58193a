#include "tfmpi/common/tensor_meta.h"

#include <fmt/format.h>

namespace tfmpi {

std::string DescribeMeta(const TensorMeta& meta) {
  std::string what = CollectiveKindName(meta.kind);
  if (meta.kind == CollectiveKind::kAllreduce) what += fmt::format("({})", ReduceOpName(meta.op));
  if (meta.kind == CollectiveKind::kBroadcast) what += fmt::format("(root {})", meta.root);
  if (meta.kind == CollectiveKind::kReduce)
    what += fmt::format("({} to root {})", ReduceOpName(meta.op), meta.root);
  if (meta.kind == CollectiveKind::kBarrier) return what;
  return fmt::format("{} {}{}", what, DataTypeName(meta.dtype), ShapeToString(meta.shape));
}

}  // namespace tfmpi
