// Drives the engine the way a training step does: one named request per
// tensor, all submitted, then all waited for.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tfmpi/engine/engine.h"

namespace tfmpi::bench {

// Float32 tensors with their own buffers (as a framework allocates them),
// reduced in place.
struct TensorSet {
  std::vector<TensorMeta> metas;
  std::vector<std::vector<float>> buffers;

  void Add(std::string name, Shape shape, ReduceOp op);
  std::size_t bytes() const;
  void Fill(float value);
  // True if every element of every tensor is within a relative 1e-6 of `expected`.
  bool AllClose(float expected) const;
};

// Starts an engine over MPI with `options`; reports failure on stderr.
Status StartMpiEngine(const EngineOptions& options, std::unique_ptr<Engine>* out);

// The engine's stats once it has accounted for `tensors` completed tensors:
// callbacks fire before the background thread updates its stats for the
// cycle, so a snapshot taken right after a wait can miss the last cycle.
EngineStats SettledStats(const Engine& engine, std::uint64_t tensors);

// Submits every tensor of `set` and waits for all of them; the first error
// wins. A reusable object: one latch, no per-request allocation of its own.
class IterationRunner {
 public:
  Status Run(Engine* engine, TensorSet* set);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::size_t remaining_ = 0;
  Status first_error_;
};

}  // namespace tfmpi::bench
