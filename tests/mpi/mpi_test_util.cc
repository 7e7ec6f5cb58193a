#include "mpi_test_util.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "patterns.h"
#include "typed_values.h"
#include "tfmpi/runtime/mpi_factory.h"

namespace tfmpi::mpitest {

void* Tensor::Reset(DataType dtype, Shape shape) {
  dtype_ = dtype;
  shape_ = std::move(shape);
  storage_.assign((bytes() + 7) / 8, 0);
  return data();
}

namespace {

void Store(DataType dtype, void* p, double v) { testing::StoreAs(dtype, p, 0, v); }
double Load(DataType dtype, const void* p) { return testing::LoadAs(dtype, p, 0); }

}  // namespace

void Tensor::Set(std::int64_t i, double v) {
  Store(dtype_, static_cast<char*>(data()) + static_cast<std::size_t>(i) * DataTypeSize(dtype_), v);
}

double Tensor::Get(std::int64_t i) const {
  return Load(dtype_,
              static_cast<const char*>(data()) + static_cast<std::size_t>(i) * DataTypeSize(dtype_));
}

void Tensor::Fill(const std::function<double(std::int64_t)>& value) {
  for (std::int64_t i = 0; i < elements(); ++i) Set(i, value(i));
}

double Representable(double v, DataType dtype) {
  std::uint64_t slot = 0;
  Store(dtype, &slot, v);
  return Load(dtype, &slot);
}

bool IsSigned(DataType dtype) { return dtype != DataType::kUInt8 && dtype != DataType::kBool; }

Request ReduceRequest(const std::string& name, ReduceOp op, int root, const Tensor& in, Tensor* out) {
  Request r = AllreduceRequest(name, op, in, out);
  r.meta.kind = CollectiveKind::kReduce;
  r.meta.root = root;
  return r;
}

Request AllreduceRequest(const std::string& name, ReduceOp op, const Tensor& in, Tensor* out) {
  if (out != &in && (out->dtype() != in.dtype() || out->shape() != in.shape()))
    out->Reset(in.dtype(), in.shape());
  Request r;
  r.meta.name = name;
  r.meta.kind = CollectiveKind::kAllreduce;
  r.meta.dtype = in.dtype();
  r.meta.op = op;
  r.meta.shape = in.shape();
  r.input = in.data();
  r.output = out->data();
  return r;
}

Request BroadcastRequest(const std::string& name, int root, const Tensor* in, Tensor* out) {
  Request r;
  r.meta.name = name;
  r.meta.kind = CollectiveKind::kBroadcast;
  r.meta.dtype = out->dtype();
  r.meta.root = root;
  r.meta.shape = out->shape();
  r.input = in ? in->data() : nullptr;
  r.output = out->data();
  return r;
}

Request AllgatherRequest(const std::string& name, const Tensor& in, Tensor* out) {
  Request r;
  r.meta.name = name;
  r.meta.kind = CollectiveKind::kAllgather;
  r.meta.dtype = in.dtype();
  r.meta.shape = in.shape();
  r.input = in.data();
  r.allocate_output = [out, dtype = in.dtype()](const Shape& s) { return out->Reset(dtype, s); };
  return r;
}

Request BarrierRequest(const std::string& name) {
  Request r;
  r.meta.name = name;
  r.meta.kind = CollectiveKind::kBarrier;
  return r;
}

void Batch::Add(Request request, std::function<void(const Status&)> check) {
  requests_.push_back(std::move(request));
  checks_.push_back(std::move(check));
}

void Batch::Run(MpiTest& t, bool all_at_once) {
  std::vector<Status> statuses;
  if (all_at_once) {
    statuses = t.RunAll(std::move(requests_));
  } else {
    for (Request& r : requests_) statuses.push_back(t.Run(std::move(r)));
  }
  requests_.clear();
  for (std::size_t i = 0; i < checks_.size(); ++i) checks_[i](statuses[i]);
  checks_.clear();
}

MpiTest::MpiTest(std::string program, const EngineOptions& options)
    : program_(std::move(program)) {
  Status s = Engine::Start(options, MakeMpiCommunicatorFactory(options), &owned_);
  if (!s.ok()) AbortJob(fmt::format("{}: the engine did not start: {}", program_, s.ToString()));
  engine_ = owned_.get();
  rank_ = engine_->rank();
  size_ = engine_->size();
}

MpiTest::MpiTest(std::string program, Engine* engine, std::function<void()> shutdown)
    : program_(std::move(program)), engine_(engine), shutdown_(std::move(shutdown)) {
  rank_ = engine_->rank();
  size_ = engine_->size();
}

MpiTest::~MpiTest() {
  if (shut_down_) return;
  if (owned_) owned_->Shutdown();
  else if (shutdown_) shutdown_();
}

void MpiTest::Fail(const std::string& what) {
  ++failures_;
  std::lock_guard<std::mutex> lock(print_mu_);
  fmt::print(stderr, "[rank {}/{}] FAIL {}: {}\n", rank_, size_, program_, what);
  std::fflush(stderr);
}

bool MpiTest::ExpectOk(const Status& s, const std::string& what) {
  if (s.ok()) return true;
  Fail(fmt::format("{}: expected OK, got {}", what, s.ToString()));
  return false;
}

void MpiTest::Note(const std::string& line) const {
  if (rank_ != 0) return;
  fmt::print("[{} np{}] {}\n", program_, size_, line);
  std::fflush(stdout);
}

Status MpiTest::Run(Request request) {
  std::vector<Request> one;
  one.push_back(std::move(request));
  return RunAll(std::move(one)).front();
}

DoneCallback MpiTest::CountedCallback(const Completion& done) {
  return [this, callback = done.Callback()](const Status& s) {
    ++completed_;
    callback(s);
  };
}

Status MpiTest::Enqueue(Request request, const Completion& done) {
  request.done = CountedCallback(done);
  return engine_->Enqueue(std::move(request));
}

std::vector<Status> MpiTest::RunAll(std::vector<Request> requests) {
  std::vector<Status> statuses(requests.size());
  std::vector<Completion> completions(requests.size());
  std::vector<std::string> names(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    names[i] = requests[i].meta.name;
    requests[i].done = CountedCallback(completions[i]);
  }
  // Together, so that the engine's next cycle sees them all.
  std::vector<Status> queued = engine_->EnqueueAll(std::move(requests));
  for (std::size_t i = 0; i < queued.size(); ++i)
    statuses[i] = queued[i].ok() ? Wait(completions[i], names[i]) : queued[i];
  return statuses;
}

Status MpiTest::Wait(const Completion& c, const std::string& name) {
  Status s;
  if (!c.WaitFor(kWaitTimeout, &s))
    AbortJob(fmt::format("[rank {}/{}] {}: tensor '{}' did not complete within {} s (a hang)",
                         rank_, size_, program_, name, kWaitTimeout.count()));
  return s;
}

EngineStats MpiTest::SettledStats() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  EngineStats stats = engine_->Stats();
  while (stats.tensors < completed_.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    stats = engine_->Stats();
  }
  Expect(stats.tensors >= completed_.load(),
         "engine stats count {} tensors after {} completed", stats.tensors, completed_.load());
  return stats;
}

void MpiTest::ExpectTensor(const Tensor& actual,
                           const std::function<double(std::int64_t)>& expected,
                           const std::string& what, double tolerance) {
  std::int64_t bad = 0;
  std::string first;
  for (std::int64_t i = 0; i < actual.elements(); ++i) {
    const double a = actual.Get(i);
    const double e = expected(i);
    const bool ok = tolerance > 0 ? std::fabs(a - e) <= tolerance * std::max(1.0, std::fabs(e))
                                  : a == Representable(e, actual.dtype());
    if (ok) continue;
    if (++bad <= 3) first += fmt::format("{}[{}] = {} (expected {}) ", bad == 1 ? "" : "; ", i, a, e);
  }
  if (bad)
    Fail(fmt::format("{} ({} {}): {} of {} elements wrong: {}", what,
                     DataTypeName(actual.dtype()), ShapeToString(actual.shape()), bad,
                     actual.elements(), first));
}

void MpiTest::ExpectShape(const Tensor& actual, const Shape& expected, const std::string& what) {
  Expect(actual.shape() == expected, "{}: shape {}, expected {}", what,
         ShapeToString(actual.shape()), ShapeToString(expected));
}

void MpiTest::AgreeAndShutdown() {
  if (shut_down_) return;
  Tensor count(DataType::kInt64, {1});
  count.Set(0, failures_.load());
  Status s = Run(AllreduceRequest("mpitest.failure_count", ReduceOp::kSum, count, &count));
  if (ExpectOk(s, "agreeing on the failure count"))
    total_failures_ = static_cast<int>(count.Get(0));
  if (owned_) owned_->Shutdown();
  else if (shutdown_) shutdown_();
  shut_down_ = true;
}

int MpiTest::ExitCode() const {
  return failures_.load() > 0 || total_failures_ != 0 ? 1 : 0;
}

int MpiTest::Finish() {
  AgreeAndShutdown();
  const int code = ExitCode();
  if (failures_.load() > 0)
    fmt::print(stderr, "[rank {}/{}] {}: {} failed checks on this rank\n", rank_, size_, program_,
               failures_.load());
  if (rank_ == 0) {
    if (code == 0) fmt::print("PASS {} with {} ranks\n", program_, size_);
    else fmt::print("FAIL {} with {} ranks: {} failed checks across all ranks\n", program_,
                    size_, std::max(total_failures_, failures_.load()));
  }
  std::fflush(stdout);
  std::fflush(stderr);
  return code;
}

void MpiTest::AbortJob(const std::string& why) {
  fmt::print(stderr, "{}\n", why);
  std::fflush(stderr);
  int initialized = 0, finalized = 0, level = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  // The engine's thread owns MPI; another thread may call MPI_Abort only
  // under MPI_THREAD_MULTIPLE. Otherwise exiting makes mpiexec end the job.
  if (initialized && !finalized) MPI_Query_thread(&level);
  if (level == MPI_THREAD_MULTIPLE) MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);
}

void AddReduce(MpiTest& t, Batch& b, const std::string& name, DataType d, ReduceOp op, int root,
               std::int64_t n, bool in_place) {
  const int K = t.size(), r = t.rank();
  Tensor& in = b.NewTensor(d, {n});
  in.Fill([&](std::int64_t i) { return ReduceInput(d, op, r, i, K); });
  Tensor* out = in_place ? &in : &b.NewTensor(d, {n});
  b.Add(ReduceRequest(name, op, root, in, out), [&t, out, d, op, K, r, root, name](const Status& s) {
    if (!t.ExpectOk(s, name)) return;
    if (r == root)
      t.ExpectTensor(*out, [&](std::int64_t i) { return ReduceExpected(d, op, i, K); }, name,
                     ReduceTolerance(d, op));
    else
      t.ExpectTensor(*out, [&](std::int64_t i) { return ReduceInput(d, op, r, i, K); },
                     name + " (not its root: its own input)");
  });
}

}  // namespace tfmpi::mpitest
