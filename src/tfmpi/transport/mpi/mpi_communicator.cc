#include "tfmpi/transport/mpi/mpi_communicator.h"

#include <fmt/format.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include "tfmpi/common/enforce.h"
#include "tfmpi/common/logging.h"
#include "tfmpi/common/reduce.h"
#include "tfmpi/planning/wait_pauses.h"

namespace tfmpi {
namespace {

// MPI user-defined reduction for 16-bit floats: computes in float32.
template <DataType D, ReduceOp O>
void HalfReduce(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  ReduceInto(inout, in, static_cast<std::size_t>(*len), D, O);
}

constexpr ReduceOp kHalfOps[4] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax,
                                  ReduceOp::kProduct};

template <DataType D>
Status CreateHalfOps(mpi::Op (&ops)[4]) {
  MPI_User_function* fns[4] = {&HalfReduce<D, ReduceOp::kSum>, &HalfReduce<D, ReduceOp::kMin>,
                               &HalfReduce<D, ReduceOp::kMax>,
                               &HalfReduce<D, ReduceOp::kProduct>};
  for (int i = 0; i < 4; ++i)
    TFMPI_RETURN_IF_ERROR(MpiStatus(MPI_Op_create(fns[i], 1, ops[i].out()), "MPI_Op_create"));
  return Status::Ok();
}

int HalfOpIndex(ReduceOp op) {
  for (int i = 0; i < 4; ++i)
    if (kHalfOps[i] == op) return i;
  return 0;
}

// Note [Waiting without spinning]
// A blocking MPI call polls at full speed while it waits for a peer. The
// negotiation AND runs every cycle, and a rank often reaches it while a peer
// is busy computing (or descheduled: on a machine with as many ranks as
// cores, the peer's engine thread shares a core with its compute threads).
// Polling then takes CPU from this rank's own training (measured at -np 2 on
// 2 cores: a quarter of a core per rank). So the AND is started with
// MPI_Iallreduce and tested in a loop: back to back for a short spin (peers
// that are in step arrive within it, so steady-state latency is unchanged),
// then with sleeps between tests that grow with the wait (Note [Pauses that
// follow the wait], planning/wait_pauses.h). The thread's timer slack is set
// to its minimum, so a pause of 10 us sleeps about 10 us, not the default
// slack of 50 us more. The data collectives stay blocking: they run once every
// rank has joined the AND, and the test loop of a non-blocking collective
// delays the rounds of a large message (measured: an allreduce of 1.26 MB
// across two emulated hosts took ~0.9 ms longer that way).
//
// A lost peer (Note [Lost peers]) ends the wait with the watchdog's error.
Status WaitWithBackoff(MPI_Request* request, const char* what, const PeerWatchdog* watchdog) {
  using planning::WaitPauses;
#ifdef __linux__
  thread_local const bool precise_sleeps = prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) == 0;
  (void)precise_sleeps;
#endif
  const auto start = std::chrono::steady_clock::now();
  auto pause = WaitPauses::kFirstPause;
  while (true) {
    int done = 0;
    TFMPI_RETURN_IF_ERROR(MpiStatus(MPI_Test(request, &done, MPI_STATUS_IGNORE), what));
    if (done) return Status::Ok();
    const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - start);
    if (waited < WaitPauses::kSpin) continue;
    if (watchdog != nullptr) TFMPI_RETURN_IF_ERROR(watchdog->health());
    std::this_thread::sleep_for(pause);
    pause = WaitPauses::Next(pause, waited + pause);
  }
}

}  // namespace

Status MpiStatus(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status::Internal(fmt::format("{} failed: {}", what, std::string(text, len)));
}

Status DuplicateComm(MPI_Comm parent, const char* what, mpi::Comm* out, int* rank, int* size) {
  TFMPI_RETURN_IF_ERROR(MpiStatus(MPI_Comm_dup(parent, out->out()), what));
  MPI_Comm_set_errhandler(out->get(), MPI_ERRORS_RETURN);
  MPI_Comm_rank(out->get(), rank);
  MPI_Comm_size(out->get(), size);
  return Status::Ok();
}

Status MpiEnvironment::Create(std::unique_ptr<MpiEnvironment>* out) {
  std::unique_ptr<MpiEnvironment> env(new MpiEnvironment());
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    return Status::FailedPrecondition(
        "MPI has already been finalized in this process; tfmpi can't start again");
  if (!initialized) {
    TFMPI_RETURN_IF_ERROR(MpiStatus(
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &env->thread_level_),
        "MPI_Init_thread"));
    env->owns_ = true;
  } else {
    MPI_Query_thread(&env->thread_level_);
    // Someone else (e.g. mpi4py) initialised MPI on another thread; the
    // engine's background thread makes MPI calls, so it needs SERIALIZED.
    if (env->thread_level_ < MPI_THREAD_SERIALIZED)
      return Status::FailedPrecondition(
          "MPI was initialised elsewhere with a thread level below MPI_THREAD_SERIALIZED; "
          "tfmpi's background thread needs at least SERIALIZED (initialise MPI with "
          "MPI_THREAD_MULTIPLE, or let tfmpi initialise it)");
  }
  *out = std::move(env);
  return Status::Ok();
}

MpiEnvironment::~MpiEnvironment() {
  if (owns_) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
}

Status MpiCommunicator::SetMaxMessageElements(std::size_t count) {
  if (count == 0 || count > INT_MAX)
    return Status::InvalidArgument(
        fmt::format("max_message_elements must be in [1, {}], got {}", INT_MAX, count));
  options_.max_message_elements = count;
  return Status::Ok();
}

Status MpiCommunicator::Create(MPI_Comm parent, const MpiOptions& options,
                               std::unique_ptr<MpiCommunicator>* out) {
  if (options.max_message_elements == 0 || options.max_message_elements > INT_MAX)
    return Status::InvalidArgument(fmt::format(
        "max_message_elements must be in [1, {}], got {}", INT_MAX, options.max_message_elements));
  std::unique_ptr<MpiCommunicator> c(new MpiCommunicator());
  c->options_ = options;
  TFMPI_RETURN_IF_ERROR(DuplicateComm(parent, "MPI_Comm_dup", &c->comm_, &c->rank_, &c->size_));
  TFMPI_RETURN_IF_ERROR(MpiStatus(MPI_Comm_split_type(c->comm_.get(), MPI_COMM_TYPE_SHARED,
                                                      c->rank_, MPI_INFO_NULL,
                                                      c->local_comm_.out()),
                                  "MPI_Comm_split_type"));
  MPI_Comm_rank(c->local_comm_.get(), &c->local_rank_);
  MPI_Comm_size(c->local_comm_.get(), &c->local_size_);
  TFMPI_RETURN_IF_ERROR(
      MpiStatus(MPI_Type_contiguous(2, MPI_BYTE, c->half_type_.out()), "MPI_Type_contiguous"));
  TFMPI_RETURN_IF_ERROR(MpiStatus(MPI_Type_commit(c->half_type_.ptr()), "MPI_Type_commit"));
  TFMPI_RETURN_IF_ERROR(CreateHalfOps<DataType::kFloat16>(c->f16_ops_));
  TFMPI_RETURN_IF_ERROR(CreateHalfOps<DataType::kBFloat16>(c->bf16_ops_));
  int thread_level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&thread_level);
  // The watchdog's set-up is collective, so every rank makes it; only its
  // thread depends on the timeout, whose on/off the ranks then check
  // (engine/shared_settings.h).
  if (c->size_ > 1) {
    if (thread_level == MPI_THREAD_MULTIPLE) {
      TFMPI_RETURN_IF_ERROR(PeerWatchdog::Start(c->comm_.get(), options.watchdog, &c->watchdog_));
    } else if (options.watchdog.timeout_seconds > 0) {
      TFMPI_LOG_WARNING("MPI runs without MPI_THREAD_MULTIPLE: no heartbeats, so a rank that is "
                        "killed, frozen or cut off is not detected (Note [Lost peers])");
    }
  }
  *out = std::move(c);
  return Status::Ok();
}

std::string MpiCommunicator::name() const {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string v(version, static_cast<std::size_t>(len));
  auto cut = v.find_first_of(",\n");
  return "mpi (" + v.substr(0, cut) + ")";
}

MPI_Datatype MpiCommunicator::TypeFor(DataType dtype) const {
  switch (dtype) {
    case DataType::kFloat16:
    case DataType::kBFloat16: return half_type_.get();
    case DataType::kFloat32: return mpi::TypeOf<float>();
    case DataType::kFloat64: return mpi::TypeOf<double>();
    case DataType::kInt32: return mpi::TypeOf<std::int32_t>();
    case DataType::kInt64: return mpi::TypeOf<std::int64_t>();
    case DataType::kUInt8:
    case DataType::kBool: return mpi::TypeOf<std::uint8_t>();  // bool: 0/1 bytes
  }
  return MPI_DATATYPE_NULL;
}

Status MpiCommunicator::OpFor(DataType dtype, ReduceOp op, MPI_Op* out) const {
  TFMPI_RETURN_IF_ERROR(CheckReduceSupported(dtype, op));
  if (dtype == DataType::kFloat16) { *out = f16_ops_[HalfOpIndex(op)].get(); return Status::Ok(); }
  if (dtype == DataType::kBFloat16) { *out = bf16_ops_[HalfOpIndex(op)].get(); return Status::Ok(); }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: *out = MPI_SUM; break;
    case ReduceOp::kMin: *out = MPI_MIN; break;
    case ReduceOp::kMax: *out = MPI_MAX; break;
    case ReduceOp::kProduct: *out = MPI_PROD; break;
  }
  return Status::Ok();
}

// Note [Large messages]: MPI counts are int. Buffers longer than
// max_message_elements are processed in consecutive chunks, which is exact for
// element-wise reductions and broadcasts.
Status MpiCommunicator::Allreduce(const void* in, void* out, std::size_t count, DataType dtype,
                                  ReduceOp op) {
  MPI_Op mpi_op;
  TFMPI_RETURN_IF_ERROR(OpFor(dtype, op, &mpi_op));
  const std::size_t elem = DataTypeSize(dtype);
  for (std::size_t off = 0; off < count; off += options_.max_message_elements) {
    int n = static_cast<int>(std::min(options_.max_message_elements, count - off));
    char* dst = static_cast<char*>(out) + off * elem;
    const void* src = in == out ? MPI_IN_PLACE : static_cast<const char*>(in) + off * elem;
    TFMPI_RETURN_IF_ERROR(
        MpiStatus(MPI_Allreduce(src, dst, n, TypeFor(dtype), mpi_op, comm_.get()), "MPI_Allreduce"));
  }
  return Status::Ok();
}

Status MpiCommunicator::Broadcast(void* buf, std::size_t count, DataType dtype, int root) {
  const std::size_t elem = DataTypeSize(dtype);
  for (std::size_t off = 0; off < count; off += options_.max_message_elements) {
    int n = static_cast<int>(std::min(options_.max_message_elements, count - off));
    TFMPI_RETURN_IF_ERROR(MpiStatus(
        MPI_Bcast(static_cast<char*>(buf) + off * elem, n, TypeFor(dtype), root, comm_.get()),
        "MPI_Bcast"));
  }
  return Status::Ok();
}

Status MpiCommunicator::Allgatherv(const void* in, void* out,
                                   const std::vector<std::size_t>& counts, DataType dtype) {
  const std::size_t elem = DataTypeSize(dtype);
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  if (total <= options_.max_message_elements) {
    std::vector<int> icounts(counts.size()), displs(counts.size());
    int d = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      icounts[r] = static_cast<int>(counts[r]);
      displs[r] = d;
      d += icounts[r];
    }
    // In place where `in` is already this rank's block of `out`.
    const bool in_place = in == static_cast<const char*>(out) +
                                   static_cast<std::size_t>(displs[static_cast<std::size_t>(rank_)]) * elem;
    return MpiStatus(MPI_Allgatherv(in_place ? MPI_IN_PLACE : in,
                                    icounts[static_cast<std::size_t>(rank_)], TypeFor(dtype),
                                    out, icounts.data(), displs.data(), TypeFor(dtype),
                                    comm_.get()),
                     "MPI_Allgatherv");
  }
  // Too large for int displacements: each rank broadcasts its block in chunks.
  std::size_t offset = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    char* block = static_cast<char*>(out) + offset * elem;
    if (static_cast<int>(r) == rank_ && counts[r] > 0 && block != in)
      std::memcpy(block, in, counts[r] * elem);
    TFMPI_RETURN_IF_ERROR(Broadcast(block, counts[r], dtype, static_cast<int>(r)));
    offset += counts[r];
  }
  return Status::Ok();
}

Status MpiCommunicator::ReduceScatter(const void* in, void* out,
                                      const std::vector<std::size_t>& counts, DataType dtype,
                                      ReduceOp op) {
  MPI_Op mpi_op;
  TFMPI_RETURN_IF_ERROR(OpFor(dtype, op, &mpi_op));
  TFMPI_ENFORCE_EQ(counts.size(), static_cast<std::size_t>(size_));
  std::vector<int> icounts(counts.size());
  std::size_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    total += counts[r];
    TFMPI_ENFORCE(total <= INT_MAX, "reduce-scatter of {} elements in one call", total);
    icounts[r] = static_cast<int>(counts[r]);
  }
  if (total == 0) return Status::Ok();
  return MpiStatus(MPI_Reduce_scatter(in, out, icounts.data(), TypeFor(dtype), mpi_op, comm_.get()),
                   "MPI_Reduce_scatter");
}

// Note [Large messages] as for Allreduce: consecutive chunks.
Status MpiCommunicator::Reduce(const void* in, void* out, std::size_t count, DataType dtype,
                               ReduceOp op, int root) {
  MPI_Op mpi_op;
  TFMPI_RETURN_IF_ERROR(OpFor(dtype, op, &mpi_op));
  const std::size_t elem = DataTypeSize(dtype);
  const bool in_place = rank_ == root && in == out;  // MPI_IN_PLACE is the root's alone
  for (std::size_t off = 0; off < count; off += options_.max_message_elements) {
    int n = static_cast<int>(std::min(options_.max_message_elements, count - off));
    const void* src = in_place ? MPI_IN_PLACE : static_cast<const char*>(in) + off * elem;
    void* dst = rank_ == root ? static_cast<char*>(out) + off * elem : nullptr;
    TFMPI_RETURN_IF_ERROR(
        MpiStatus(MPI_Reduce(src, dst, n, TypeFor(dtype), mpi_op, root, comm_.get()), "MPI_Reduce"));
  }
  return Status::Ok();
}

Status MpiCommunicator::Barrier() { return MpiStatus(MPI_Barrier(comm_.get()), "MPI_Barrier"); }

Status MpiCommunicator::BitwiseAnd(std::uint64_t* words, std::size_t n) {
  // Note [Waiting without spinning]
  MPI_Request request = MPI_REQUEST_NULL;
  TFMPI_RETURN_IF_ERROR(MpiStatus(MPI_Iallreduce(MPI_IN_PLACE, words, static_cast<int>(n),
                                                 mpi::TypeOf<std::uint64_t>(), MPI_BAND,
                                                 comm_.get(), &request),
                                  "MPI_Iallreduce(negotiation)"));
  return WaitWithBackoff(&request, "MPI_Test(negotiation)", watchdog_.get());
}

Status MpiCommunicator::GatherToRoot(const std::string& mine, std::vector<std::string>* all) {
  int my_size = static_cast<int>(mine.size());
  std::vector<int> sizes(rank_ == 0 ? static_cast<std::size_t>(size_) : 0);
  TFMPI_RETURN_IF_ERROR(MpiStatus(
      MPI_Gather(&my_size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, comm_.get()), "MPI_Gather"));
  std::vector<int> displs(sizes.size());
  std::string buffer;
  if (rank_ == 0) {
    long long total = 0;
    for (std::size_t r = 0; r < sizes.size(); ++r) {
      displs[r] = static_cast<int>(total);
      total += sizes[r];
    }
    TFMPI_ENFORCE(total <= INT_MAX, "negotiation message too large: {} bytes", total);
    buffer.resize(static_cast<std::size_t>(total));
  }
  TFMPI_RETURN_IF_ERROR(MpiStatus(MPI_Gatherv(mine.data(), my_size, MPI_CHAR, buffer.data(),
                                              sizes.data(), displs.data(), MPI_CHAR, 0,
                                              comm_.get()),
                                  "MPI_Gatherv"));
  all->clear();
  if (rank_ == 0)
    for (std::size_t r = 0; r < sizes.size(); ++r)
      all->push_back(buffer.substr(static_cast<std::size_t>(displs[r]),
                                   static_cast<std::size_t>(sizes[r])));
  return Status::Ok();
}

Status MpiCommunicator::BroadcastFromRoot(std::string* data) {
  std::uint64_t n = data->size();
  TFMPI_RETURN_IF_ERROR(
      MpiStatus(MPI_Bcast(&n, 1, mpi::TypeOf<std::uint64_t>(), 0, comm_.get()), "MPI_Bcast"));
  data->resize(static_cast<std::size_t>(n));
  return Broadcast(data->data(), data->size(), DataType::kUInt8, 0);
}

// Note [Abandoning MPI]
// After a failure the ranks may sit in different collectives, and this rank
// issues no more. Freeing a communicator is collective in the MPI standard,
// and MPI_Finalize waits for every rank (Open MPI fences all processes), so
// either could block forever on ranks stuck in a collective this rank will
// never join, and with it the process's exit. An abandoned communicator is
// therefore never freed and MPI never finalised: the process can exit, and
// mpirun then ends the job's other processes (an MPI process that exits
// without MPI_Finalize aborts the job), so no rank hangs.
void MpiCommunicator::Abandon() {
  if (watchdog_) watchdog_->Abandon();
  comm_.release();
  local_comm_.release();
}

}  // namespace tfmpi
