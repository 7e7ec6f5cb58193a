// One Engine per rank thread over a shared InProcWorld, plus waiting on
// completions with a deadline so that a hang fails the test instead of
// blocking it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "forwarding_communicator.h"
#include "spawn.h"
#include "tfmpi/engine/completion.h"
#include "tfmpi/engine/engine.h"
#include "tfmpi/transport/inproc/inproc_communicator.h"

namespace tfmpi::testing {

using Deadline = Clock::time_point;

// Generous: a healthy run takes milliseconds; this only bounds a hang.
inline Deadline DeadlineIn(std::chrono::seconds s = std::chrono::seconds(30)) {
  return Clock::now() + s;
}

// Options for tests: a short cycle keeps negotiation latency (and the suite) fast.
inline EngineOptions TestOptions() {
  EngineOptions o;
  o.cycle_time_ms = 0.2;
  return o;
}

// Waits for `c` until `deadline`. Missing it is a failure naming `what`, and
// returns an Internal status so callers' value checks fail too.
inline Status Await(const Completion& c, const std::string& what, Deadline deadline) {
  Status s;
  if (!c.WaitFor(deadline - Clock::now(), &s)) {
    ADD_FAILURE() << "timed out waiting for " << what;
    return Status::Internal("test timed out waiting for " + what);
  }
  return s;
}

// Runs body(rank, engine) on `size` rank threads, each with its own Engine on
// one InProcWorld; then every rank calls Shutdown (it is collective). Returns
// each rank's final stats (complete: the background threads have stopped).
// `wrap` (optional) wraps each rank's communicator, to inject faults.
inline std::vector<EngineStats> RunEngines(
    int size, const EngineOptions& options,
    const std::function<void(int rank, Engine& engine)>& body,
    const WrapCommunicator& wrap = nullptr) {
  auto world = std::make_shared<InProcWorld>(size);
  std::vector<EngineStats> stats(static_cast<std::size_t>(size));
  Spawn(size, [&](int rank) {
    std::unique_ptr<Engine> engine;
    Status s = Engine::Start(
        options,
        [&](std::unique_ptr<Communicator>* out) {
          *out = std::make_unique<InProcCommunicator>(world, rank);
          if (wrap) *out = wrap(rank, std::move(*out));
          return Status::Ok();
        },
        &engine);
    ASSERT_TRUE(s.ok()) << "rank " << rank << ": " << s.ToString();
    try {
      body(rank, *engine);
    } catch (...) {
      engine->Shutdown();  // let the other ranks finish before reporting
      throw;
    }
    engine->Shutdown();
    stats[static_cast<std::size_t>(rank)] = engine->Stats();
  });
  return stats;
}

// Every rank allreduces (sum) `name`, shape {n}, holding rank + i; checks the result.
inline void SumOnce(Engine& engine, const std::string& name, std::int64_t n) {
  std::vector<double> buf(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) buf[i] = engine.rank() + static_cast<double>(i);
  Completion done;
  Request req;
  req.meta.name = name;
  req.meta.dtype = DataType::kFloat64;
  req.meta.shape = {n};
  req.input = req.output = buf.data();
  req.done = done.Callback();
  ASSERT_TRUE(engine.Enqueue(std::move(req)).ok());
  const Status s = Await(done, name, DeadlineIn());
  ASSERT_TRUE(s.ok()) << s.ToString();
  const double size = engine.size();
  for (std::int64_t i = 0; i < n; ++i)
    ASSERT_EQ(buf[i], size * (size - 1) / 2 + size * static_cast<double>(i))
        << name << "[" << i << "]";
}

}  // namespace tfmpi::testing
