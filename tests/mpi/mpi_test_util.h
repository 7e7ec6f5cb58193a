// Shared harness for the tier-2 tests: programs run under `mpiexec -n K`
// against the real engine over MPI.
//
// Note [MPI test failures]
// Checks never stop a program: a failed check prints "[rank r/K] FAIL ..."
// and the program carries on, so every rank keeps submitting the same
// collectives and nobody hangs. At the end the ranks add up their failure
// counts through the engine itself (MpiTest::Finish) and every rank exits
// non-zero if any rank failed; a rank with local failures exits non-zero even
// if that final allreduce were wrong. A collective that does not complete
// within kWaitTimeout aborts the whole job (MPI_Abort), so a hang fails fast
// with a message naming the tensor rather than at the CTest timeout.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tfmpi/engine/completion.h"
#include "tfmpi/engine/engine.h"
#include "tfmpi/engine/options.h"

namespace tfmpi::mpitest {

inline constexpr std::chrono::seconds kWaitTimeout{60};

// A dense host tensor of any engine dtype. Elements are read and written as
// double; 16-bit floats are converted, bool is stored as 0/1 bytes, uint8
// wraps modulo 256. Storage is 8-byte aligned.
class Tensor {
 public:
  Tensor() = default;
  Tensor(DataType dtype, Shape shape) { Reset(dtype, std::move(shape)); }

  // Reshapes to `shape` (contents undefined) and returns the data pointer.
  void* Reset(DataType dtype, Shape shape);

  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::int64_t elements() const { return NumElements(shape_); }
  std::size_t bytes() const { return static_cast<std::size_t>(elements()) * DataTypeSize(dtype_); }
  void* data() { return storage_.empty() ? nullptr : storage_.data(); }
  const void* data() const { return storage_.empty() ? nullptr : storage_.data(); }

  void Set(std::int64_t i, double v);
  double Get(std::int64_t i) const;
  void Fill(const std::function<double(std::int64_t)>& value);

 private:
  DataType dtype_ = DataType::kFloat32;
  Shape shape_;
  std::vector<std::uint64_t> storage_;
};

// What storing `v` in `dtype` keeps (uint8 wraps, bool is v != 0).
double Representable(double v, DataType dtype);
bool IsSigned(DataType dtype);  // float and int types; not uint8 or bool

// Request builders. The tensors must outlive the request; `out` may be `&in`
// (in place). Broadcast takes `in` only on the root (nullptr elsewhere is fine).
Request AllreduceRequest(const std::string& name, ReduceOp op, const Tensor& in, Tensor* out);
Request BroadcastRequest(const std::string& name, int root, const Tensor* in, Tensor* out);
// Reduced to `root` only; elsewhere *out becomes a copy of `in`.
Request ReduceRequest(const std::string& name, ReduceOp op, int root, const Tensor& in, Tensor* out);
// `out` is reshaped to the gathered shape when the engine allocates it.
Request AllgatherRequest(const std::string& name, const Tensor& in, Tensor* out);
Request BarrierRequest(const std::string& name);

class MpiTest;

// Requests with their checks, run one at a time (each its own cycle, so an
// allreduce or broadcast runs alone on the unfused path) or all enqueued
// together (so small ones fuse). Owns the tensors it hands out.
class Batch {
 public:
  // A tensor whose address stays valid for the life of the batch.
  Tensor& NewTensor(DataType dtype, Shape shape) { return tensors_.emplace_back(dtype, shape); }
  void Add(Request request, std::function<void(const Status&)> check);
  void Run(MpiTest& t, bool all_at_once);
  std::size_t size() const { return requests_.size(); }

 private:
  std::deque<Tensor> tensors_;
  std::vector<Request> requests_;
  std::vector<std::function<void(const Status&)>> checks_;
};

// One test program's engine and failure record. Construct it once per
// process (MPI is initialised once); it shuts the engine down in Finish().
class MpiTest {
 public:
  // Starts the engine over MPI with `options` (aborts if it can't start).
  MpiTest(std::string program, const EngineOptions& options);
  // Uses an engine started elsewhere (the global engine); `shutdown` stops it.
  MpiTest(std::string program, Engine* engine, std::function<void()> shutdown);
  ~MpiTest();

  int rank() const { return engine_->rank(); }
  int size() const { return engine_->size(); }
  Engine& engine() { return *engine_; }

  // Records and prints a failure tagged with the rank. Thread-safe.
  void Fail(const std::string& what);
  template <typename... Args>
  bool Expect(bool ok, fmt::format_string<Args...> format, Args&&... args) {
    if (!ok) Fail(fmt::format(format, std::forward<Args>(args)...));
    return ok;
  }
  // Expects an OK status; `what` names the operation.
  bool ExpectOk(const Status& s, const std::string& what);
  int failures() const { return failures_.load(); }

  // Prints a progress line from rank 0 only.
  void Note(const std::string& line) const;

  // Enqueues `request` to fill `done` when it completes (from any thread).
  Status Enqueue(Request request, const Completion& done);
  // Enqueues and waits (kWaitTimeout). Returns Enqueue's error if it refused.
  Status Run(Request request);
  // Enqueues every request, then waits for all; statuses in request order.
  std::vector<Status> RunAll(std::vector<Request> requests);
  // Waits for a completion, aborting the job after kWaitTimeout.
  Status Wait(const Completion& c, const std::string& name);

  // Engine statistics, once they cover every request that completed through
  // this harness: the engine updates them at the end of each cycle, just
  // after the callbacks fire, so a plain Stats() right after a completion
  // can lag by one cycle.
  EngineStats SettledStats();

  // Compares every element of `actual` with `expected(i)` (exactly after
  // rounding to the dtype, or within `tolerance` relative error when it is
  // > 0); reports the first few differences.
  void ExpectTensor(const Tensor& actual, const std::function<double(std::int64_t)>& expected,
                    const std::string& what, double tolerance = 0);
  void ExpectShape(const Tensor& actual, const Shape& expected, const std::string& what);

  // Agrees on the total failure count across ranks (through the engine) and
  // shuts the engine down. Later checks are local to this rank.
  void AgreeAndShutdown();
  // 0 if no rank failed; call after AgreeAndShutdown().
  int ExitCode() const;
  // AgreeAndShutdown() then ExitCode(); prints the verdict on rank 0.
  int Finish();

  // Ends the whole MPI job at once (used on timeouts).
  [[noreturn]] static void AbortJob(const std::string& why);

 private:
  std::string program_;
  std::unique_ptr<Engine> owned_;
  Engine* engine_ = nullptr;
  std::function<void()> shutdown_;
  std::atomic<int> failures_{0};
  // `done`'s callback, counting the completion in completed_.
  DoneCallback CountedCallback(const Completion& done);
  std::atomic<std::uint64_t> completed_{0};  // requests whose callback ran
  int total_failures_ = -1;  // after AgreeAndShutdown
  bool shut_down_ = false;
  int rank_ = 0, size_ = 1;  // kept for messages after shutdown
  std::mutex print_mu_;
};

// Adds to `b` a reduce to `root` of `n` ReduceInput elements and its check:
// the root gets ReduceExpected, every other rank its own input.
void AddReduce(MpiTest& t, Batch& b, const std::string& name, DataType d, ReduceOp op, int root,
               std::int64_t n, bool in_place);

}  // namespace tfmpi::mpitest
