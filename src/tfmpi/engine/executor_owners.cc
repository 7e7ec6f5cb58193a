// Reduces to owners, and the executor's broadcast groups of several roots: a
// fused reduce of several owners runs as one reduce-scatter per round and a
// broadcast of several roots as one allgather per round, over the layout of
// Note [Owner layout] (planning/owner_layout.h).
#include <cstring>

#include "tfmpi/common/reduce.h"
#include "tfmpi/engine/executor.h"
#include "tfmpi/planning/owner_layout.h"

namespace tfmpi {

namespace {

std::size_t Elements(const TensorMeta& meta) { return static_cast<std::size_t>(NumElements(meta.shape)); }

}  // namespace

// Each tensor is reduced to its root; elsewhere its output is its input.
// One root: MPI's reduce (straight from the caller's buffer when alone);
// several: reduce-scatter rounds over the owner layout.
Status Executor::RunReduce(Group& group) {
  const TensorMeta& meta = group.front()->response->meta;
  const auto [dtype, elem, average, op, scale] = ReductionOf(meta);
  const int me = comm_->rank();

  std::vector<std::size_t> segments(static_cast<std::size_t>(comm_->size()), 0);
  std::vector<std::size_t> starts;  // each tensor's start in its root's segment
  bool one_root = true;
  for (const Item* it : group) {
    const int root = it->response->meta.root;
    one_root = one_root && root == meta.root;
    std::size_t& segment = segments[static_cast<std::size_t>(root)];
    starts.push_back(segment);
    segment += Elements(it->response->meta);
  }
  for (Item* it : group)  // not reduced here: the output is the input
    if (it->response->meta.root != me && it->request.output != it->request.input &&
        it->response->meta.bytes())
      std::memcpy(it->request.output, it->request.input, it->response->meta.bytes());
  const std::size_t mine = segments[static_cast<std::size_t>(me)];

  const Clock::time_point a = Clock::now();
  if (group.size() == 1) {
    Item& it = *group.front();
    Status s = comm_->Reduce(it.request.input, it.request.output, Elements(meta), dtype, op,
                             meta.root);
    const Clock::time_point b = Clock::now();
    Trace(it, "COLLECTIVE", a, b);
    if (s.ok() && average && mine > 0) {
      ScaleBuffer(it.request.output, mine, dtype, scale);
      Trace(it, "COPY_OUT", b, Clock::now());
    }
    return s;
  }

  const planning::OwnerLayout layout(segments, one_root ? 0 : comm_->MaxMessageElements());
  char* buffer = FusionBuffer(layout.total() * elem);
  for (std::size_t i = 0; i < group.size(); ++i) {
    const TensorMeta& m = group[i]->response->meta;
    const char* in = static_cast<const char*>(group[i]->request.input);
    layout.ForEachPiece(m.root, starts[i], Elements(m),
                        [&](std::size_t at, std::size_t from, std::size_t n) {
                          std::memcpy(buffer + at * elem, in + (from - starts[i]) * elem, n * elem);
                        });
  }
  const Clock::time_point b = Clock::now();
  Status s;
  char* owned = buffer;  // one root: reduced in place, the root's segment is the buffer
  if (one_root) {
    s = comm_->Reduce(buffer, buffer, layout.total(), dtype, op, meta.root);
  } else {
    if (owned_buffer_.size() < mine * elem) owned_buffer_.resize(mine * elem);
    owned = owned_buffer_.data();
    for (std::size_t k = 0; k < layout.rounds() && s.ok(); ++k)
      s = comm_->ReduceScatter(buffer + layout.round_offset(k) * elem,
                               owned + layout.piece_start(me, k) * elem, layout.counts(k), dtype, op);
  }
  const Clock::time_point c = Clock::now();
  if (s.ok()) {
    for (std::size_t i = 0; i < group.size(); ++i) {
      const TensorMeta& m = group[i]->response->meta;
      const std::size_t n = Elements(m);
      if (m.root != me || n == 0) continue;
      if (average) ScaleCopy(group[i]->request.output, owned + starts[i] * elem, n, dtype, scale);
      else std::memcpy(group[i]->request.output, owned + starts[i] * elem, n * elem);
    }
  }
  TraceFused(group, a, b, c, Clock::now());
  return s;
}

// Every rank receives each tensor's root's value: rank r contributes the
// tensors it is root of, and one allgather a round moves them all.
Status Executor::RunOwnerBroadcast(Group& group) {
  const int me = comm_->rank();
  std::vector<std::size_t> segments(static_cast<std::size_t>(comm_->size()), 0);
  std::vector<std::size_t> starts;
  for (const Item* it : group) {
    std::size_t& segment = segments[static_cast<std::size_t>(it->response->meta.root)];
    starts.push_back(segment);
    segment += it->response->meta.bytes();
  }
  const planning::OwnerLayout layout(segments, comm_->MaxMessageElements());
  const Clock::time_point a = Clock::now();
  char* buffer = FusionBuffer(layout.total());
  for (std::size_t i = 0; i < group.size(); ++i) {
    Item& it = *group[i];
    const TensorMeta& m = it.response->meta;
    if (m.root != me || m.bytes() == 0) continue;
    if (it.request.output != it.request.input)  // the root's result is its input
      std::memcpy(it.request.output, it.request.input, m.bytes());
    const char* in = static_cast<const char*>(it.request.input);
    layout.ForEachPiece(me, starts[i], m.bytes(), [&](std::size_t at, std::size_t from, std::size_t n) {
      std::memcpy(buffer + at, in + (from - starts[i]), n);
    });
  }
  const Clock::time_point b = Clock::now();
  Status s;
  for (std::size_t k = 0; k < layout.rounds() && s.ok(); ++k)
    s = comm_->Allgatherv(buffer + layout.buffer_offset(me, k), buffer + layout.round_offset(k),
                          layout.counts(k), DataType::kUInt8);
  const Clock::time_point c = Clock::now();
  if (s.ok()) {
    for (std::size_t i = 0; i < group.size(); ++i) {
      Item& it = *group[i];
      const TensorMeta& m = it.response->meta;
      if (m.root == me) continue;
      char* out = static_cast<char*>(it.request.output);
      layout.ForEachPiece(m.root, starts[i], m.bytes(),
                          [&](std::size_t at, std::size_t from, std::size_t n) {
                            std::memcpy(out + (from - starts[i]), buffer + at, n);
                          });
    }
  }
  const Clock::time_point d = Clock::now();
  TraceFused(group, a, b, c, d);
  return s;
}

}  // namespace tfmpi
