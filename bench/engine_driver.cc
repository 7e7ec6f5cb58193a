#include "engine_driver.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "tfmpi/runtime/mpi_factory.h"

namespace tfmpi::bench {

void TensorSet::Add(std::string name, Shape shape, ReduceOp op) {
  TensorMeta meta;
  meta.name = std::move(name);
  meta.kind = CollectiveKind::kAllreduce;
  meta.dtype = DataType::kFloat32;
  meta.op = op;
  meta.shape = std::move(shape);
  buffers.emplace_back(static_cast<std::size_t>(NumElements(meta.shape)), 0.0f);
  metas.push_back(std::move(meta));
}

std::size_t TensorSet::bytes() const {
  std::size_t n = 0;
  for (const TensorMeta& m : metas) n += m.bytes();
  return n;
}

void TensorSet::Fill(float value) {
  for (auto& b : buffers) std::fill(b.begin(), b.end(), value);
}

bool TensorSet::AllClose(float expected) const {
  const float tolerance = 1e-6f * std::abs(expected);
  for (const auto& b : buffers)
    for (float x : b)
      if (!(std::abs(x - expected) <= tolerance)) return false;
  return true;
}

Status StartMpiEngine(const EngineOptions& options, std::unique_ptr<Engine>* out) {
  return Engine::Start(options, MakeMpiCommunicatorFactory(options), out);
}

EngineStats SettledStats(const Engine& engine, std::uint64_t tensors) {
  EngineStats s = engine.Stats();
  for (int i = 0; s.tensors < tensors && i < 100000; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    s = engine.Stats();
  }
  return s;
}

Status IterationRunner::Run(Engine* engine, TensorSet* set) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    remaining_ = set->metas.size();
    first_error_ = Status::Ok();
  }
  for (std::size_t i = 0; i < set->metas.size(); ++i) {
    Request r;
    r.meta = set->metas[i];
    r.input = set->buffers[i].data();
    r.output = set->buffers[i].data();
    r.done = [this](const Status& s) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!s.ok() && first_error_.ok()) first_error_ = s;
      if (--remaining_ == 0) cv_.notify_all();
    };
    Status s = engine->Enqueue(std::move(r));
    if (!s.ok()) {
      // Requests already queued still complete; wait for them before failing.
      std::unique_lock<std::mutex> lock(mu_);
      remaining_ -= set->metas.size() - i;
      cv_.wait(lock, [&] { return remaining_ == 0; });
      return s;
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return remaining_ == 0; });
  return first_error_;
}

}  // namespace tfmpi::bench
