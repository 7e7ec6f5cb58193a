#include "tfmpi/engine/executor.h"

#include <fmt/format.h>

#include <cstring>

#include "tfmpi/common/enforce.h"
#include "tfmpi/common/logging.h"
#include "tfmpi/common/reduce.h"

namespace tfmpi {

Executor::Executor(Communicator* comm, const planning::FusionOptions& fusion, Timeline* timeline,
                   std::function<void(const ExecutorStats&)> publish)
    : comm_(comm), fusion_(fusion), timeline_(timeline), publish_(std::move(publish)) {}

char* Executor::FusionBuffer(std::size_t bytes) {
  if (fusion_buffer_.size() < bytes) fusion_buffer_.resize(bytes);
  return fusion_buffer_.data();
}

void Executor::Trace(const Item& item, const char* phase, Clock::time_point a,
                     Clock::time_point b) {
  if (timeline_ && timeline_->enabled()) timeline_->Span(item.request.meta.name, phase, a, b);
}

void Executor::Finish(Item& item, const Status& status) {
  Status s = Complete(item.request, status);
  if (s.ok()) return;
  TFMPI_LOG_ERROR("{}", s.message());
  if (callback_error_.ok()) callback_error_ = std::move(s);
}

void Executor::TraceFused(const Group& group, Clock::time_point a, Clock::time_point b,
                          Clock::time_point c, Clock::time_point d) {
  for (const Item* it : group) {
    Trace(*it, "FUSE", a, b);
    Trace(*it, "COLLECTIVE", b, c);
    Trace(*it, "COPY_OUT", c, d);
  }
}

Status Executor::Execute(const std::vector<std::shared_ptr<const Response>>& responses,
                         const std::vector<NameSlot*>& slots, PendingTable* pending,
                         Clock::time_point decided_at, Status* callback_error) {
  callback_error_ = Status::Ok();
  std::vector<Item> work;
  std::vector<std::vector<std::size_t>> groups;
  Status failure;
  try {
    items_.clear();
    work.reserve(responses.size());
    TFMPI_ENFORCE_EQ(responses.size(), slots.size());
    for (std::size_t i = 0; i < responses.size(); ++i) {
      const Response& r = *responses[i];
      std::optional<Request> request = pending->Take(slots[i]);
      if (!request && !r.ok()) continue;  // a deadlock error for a tensor this rank never sent
      TFMPI_ENFORCE(request.has_value(), "negotiated tensor '{}' is not pending on this rank",
                    r.meta.name);
      items_.push_back({r.meta.kind, r.meta.dtype, r.meta.op, r.meta.root, r.meta.bytes(), !r.ok()});
      work.push_back({&r, std::move(*request)});
    }
    if (timeline_ && timeline_->enabled())
      for (const Item& it : work) Trace(it, "NEGOTIATE", it.request.submitted, decided_at);
    groups = planning::PlanFusion(items_, fusion_);
  } catch (...) {
    failure = StatusFromCurrentException("while planning the negotiated collectives");
  }

  // Note [Engine errors]: once a group failed, later groups must not call the
  // communicator; their requests fail with the first failure instead.
  for (const auto& indices : groups) {
    if (!failure.ok()) break;
    Status s;
    try {
      Group group;
      for (std::size_t i : indices) group.push_back(&work[i]);
      const Clock::time_point start = Clock::now();
      for (const Item* it : group) Trace(*it, "WAIT", decided_at, start);
      s = RunGroup(group);
      ++stats_.groups;
      if (group.size() > 1) ++stats_.fused_groups;
      for (const Item* it : group) {
        ++stats_.tensors;
        stats_.bytes += it->response->meta.bytes();
      }
      if (publish_) publish_(stats_);
    } catch (...) {
      s = StatusFromCurrentException(
          fmt::format("while running tensor '{}'", work[indices.front()].request.meta.name));
    }
    for (std::size_t i : indices) Finish(work[i], s);
    if (!s.ok()) failure = s;
  }
  if (!failure.ok())
    for (Item& it : work) Finish(it, failure);  // no-op for those already completed
  *callback_error = callback_error_;
  return failure;
}

Status Executor::RunGroup(Group& group) {
  Item& first = *group.front();
  const Response& r = *first.response;
  if (!r.ok()) {
    TFMPI_ENFORCE_EQ(group.size(), 1u);
    // A decision error fails this tensor only; the engine carries on.
    Finish(first, Status::Mismatch(r.error));
    return Status::Ok();
  }
  switch (r.meta.kind) {
    case CollectiveKind::kAllreduce: return RunAllreduce(group);
    case CollectiveKind::kBroadcast: return RunBroadcast(group);
    case CollectiveKind::kAllgather: return RunAllgather(first);
    case CollectiveKind::kReduce: return RunReduce(group);
    case CollectiveKind::kBarrier: {
      const Clock::time_point a = Clock::now();
      Status s = comm_->Barrier();
      Trace(first, "COLLECTIVE", a, Clock::now());
      return s;
    }
  }
  return Status::Internal("unknown collective kind");
}

Executor::Reduction Executor::ReductionOf(const TensorMeta& meta) const {
  const bool average = meta.op == ReduceOp::kAverage;
  return {meta.dtype, DataTypeSize(meta.dtype), average, average ? ReduceOp::kSum : meta.op,
          1.0 / comm_->size()};
}

Status Executor::RunAllreduce(Group& group) {
  const TensorMeta& meta = group.front()->response->meta;
  const auto [dtype, elem, average, op, scale] = ReductionOf(meta);

  if (group.size() == 1) {  // direct: no copies (Note [Fusion rules])
    Item& it = *group.front();
    const std::size_t count = static_cast<std::size_t>(NumElements(meta.shape));
    Clock::time_point a = Clock::now();
    Status s = comm_->Allreduce(it.request.input, it.request.output, count, dtype, op);
    Clock::time_point b = Clock::now();
    Trace(it, "COLLECTIVE", a, b);
    if (s.ok() && average && count > 0) {
      ScaleBuffer(it.request.output, count, dtype, scale);
      Trace(it, "COPY_OUT", b, Clock::now());
    }
    return s;
  }

  std::size_t total = 0;
  for (const Item* it : group) total += it->response->meta.bytes();
  char* buffer = FusionBuffer(total);
  Clock::time_point a = Clock::now();
  std::size_t off = 0;
  for (const Item* it : group) {
    const std::size_t n = it->response->meta.bytes();
    if (n) std::memcpy(buffer + off, it->request.input, n);
    off += n;
  }
  Clock::time_point b = Clock::now();
  Status s = comm_->Allreduce(buffer, buffer, total / elem, dtype, op);
  Clock::time_point c = Clock::now();
  if (s.ok()) {
    off = 0;
    for (const Item* it : group) {
      const std::size_t n = it->response->meta.bytes();
      if (n == 0) continue;
      if (average) ScaleCopy(it->request.output, buffer + off, n / elem, dtype, scale);
      else std::memcpy(it->request.output, buffer + off, n);
      off += n;
    }
  }
  Clock::time_point d = Clock::now();
  TraceFused(group, a, b, c, d);
  return s;
}

Status Executor::RunBroadcast(Group& group) {
  const TensorMeta& meta = group.front()->response->meta;
  for (const Item* it : group)
    if (it->response->meta.root != meta.root) return RunOwnerBroadcast(group);
  const bool is_root = comm_->rank() == meta.root;
  for (Item* it : group)  // the root's result is its input
    if (is_root && it->request.output != it->request.input && it->response->meta.bytes())
      std::memcpy(it->request.output, it->request.input, it->response->meta.bytes());

  if (group.size() == 1) {
    Item& it = *group.front();
    Clock::time_point a = Clock::now();
    Status s = comm_->Broadcast(it.request.output, it.response->meta.bytes(), DataType::kUInt8,
                                meta.root);
    Trace(it, "COLLECTIVE", a, Clock::now());
    return s;
  }
  std::size_t total = 0;
  for (const Item* it : group) total += it->response->meta.bytes();
  char* buffer = FusionBuffer(total);
  Clock::time_point a = Clock::now();
  std::size_t off = 0;
  if (is_root)
    for (const Item* it : group) {
      const std::size_t n = it->response->meta.bytes();
      if (n) std::memcpy(buffer + off, it->request.input, n);
      off += n;
    }
  Clock::time_point b = Clock::now();
  Status s = comm_->Broadcast(buffer, total, DataType::kUInt8, meta.root);
  Clock::time_point c = Clock::now();
  if (s.ok() && !is_root) {
    off = 0;
    for (const Item* it : group) {
      const std::size_t n = it->response->meta.bytes();
      if (n) std::memcpy(it->request.output, buffer + off, n);
      off += n;
    }
  }
  Clock::time_point d = Clock::now();
  TraceFused(group, a, b, c, d);
  return s;
}

Status Executor::RunAllgather(Item& item) {
  const Response& r = *item.response;
  const Shape& mine = item.request.meta.shape;
  std::int64_t row = 1;
  for (std::size_t i = 1; i < mine.size(); ++i) row *= mine[i];
  Shape out_shape = mine;
  out_shape[0] = 0;
  std::vector<std::size_t> counts;
  for (std::int64_t d : r.first_dims) {
    out_shape[0] += d;
    counts.push_back(static_cast<std::size_t>(d * row));
  }
  const std::size_t out_bytes = static_cast<std::size_t>(NumElements(out_shape)) *
                                DataTypeSize(r.meta.dtype);
  // An allocator that fails (nullptr or an exception) fails this request
  // only: this rank still takes part in the collective, through scratch.
  void* out = nullptr;
  Status alloc_error;
  auto what = [&] {
    return fmt::format("tensor '{}': could not allocate the allgather output {}", r.meta.name,
                       ShapeToString(out_shape));
  };
  try {
    if (item.request.allocate_output) out = item.request.allocate_output(out_shape);
    if (out == nullptr && out_bytes > 0) alloc_error = Status::Internal(what());
  } catch (...) {
    out = nullptr;
    alloc_error = StatusFromCurrentException(what());
  }
  std::vector<char> scratch;
  if (!alloc_error.ok()) {
    scratch.resize(out_bytes);  // if even this throws, the engine stops (Note [Engine errors])
    out = scratch.data();
  }
  Clock::time_point a = Clock::now();
  Status s = comm_->Allgatherv(item.request.input, out, counts, r.meta.dtype);
  Trace(item, "COLLECTIVE", a, Clock::now());
  if (s.ok() && !alloc_error.ok()) Finish(item, alloc_error);
  return s;
}

}  // namespace tfmpi
