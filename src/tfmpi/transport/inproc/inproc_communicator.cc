#include "tfmpi/transport/inproc/inproc_communicator.h"

#include <fmt/format.h>

#include <cstring>

#include "tfmpi/common/enforce.h"
#include "tfmpi/common/reduce.h"

namespace tfmpi {

InProcWorld::InProcWorld(int size) : size_(size), slots_(static_cast<std::size_t>(size)) {
  TFMPI_ENFORCE(size >= 1, "world size must be positive, got {}", size);
}

Status InProcWorld::Exchange(int rank, std::string data, std::vector<std::string>* all) {
  std::unique_lock<std::mutex> lock(mu_);
  auto aborted = [&] {
    return Status::Internal(fmt::format(
        "in-process transport: rank {} abandoned the world after a failure", aborted_by_));
  };
  cv_.wait(lock, [&] { return !draining_ || aborted_by_ >= 0; });  // previous round fully read
  if (aborted_by_ >= 0) return aborted();
  slots_[static_cast<std::size_t>(rank)] = std::move(data);
  const std::uint64_t my_generation = generation_;
  if (++arrived_ == size_) {
    draining_ = true;
    ++generation_;
    cv_.notify_all();
  } else {
    cv_.wait(lock, [&] { return generation_ != my_generation || aborted_by_ >= 0; });
    if (generation_ == my_generation) return aborted();
  }
  *all = slots_;
  if (++read_ == size_) {
    arrived_ = 0;
    read_ = 0;
    draining_ = false;
    cv_.notify_all();
  }
  return Status::Ok();
}

void InProcWorld::Abort(int rank) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_by_ < 0) aborted_by_ = rank;
  }
  cv_.notify_all();
}

InProcCommunicator::InProcCommunicator(std::shared_ptr<InProcWorld> world, int rank)
    : world_(std::move(world)), rank_(rank) {}

Status InProcCommunicator::Allreduce(const void* in, void* out, std::size_t count,
                                     DataType dtype, ReduceOp op) {
  const std::size_t bytes = count * DataTypeSize(dtype);
  std::vector<std::string> all;
  TFMPI_RETURN_IF_ERROR(
      world_->Exchange(rank_, std::string(static_cast<const char*>(in), bytes), &all));
  if (bytes) std::memcpy(out, all[0].data(), bytes);  // out may be null when empty
  for (std::size_t r = 1; r < all.size(); ++r) ReduceInto(out, all[r].data(), count, dtype, op);
  return Status::Ok();
}

Status InProcCommunicator::Broadcast(void* buf, std::size_t count, DataType dtype, int root) {
  const std::size_t bytes = count * DataTypeSize(dtype);
  std::string mine = rank_ == root ? std::string(static_cast<const char*>(buf), bytes) : "";
  std::vector<std::string> all;
  TFMPI_RETURN_IF_ERROR(world_->Exchange(rank_, std::move(mine), &all));
  if (rank_ != root && bytes) std::memcpy(buf, all[static_cast<std::size_t>(root)].data(), bytes);
  return Status::Ok();
}

Status InProcCommunicator::Allgatherv(const void* in, void* out,
                                      const std::vector<std::size_t>& counts, DataType dtype) {
  const std::size_t elem = DataTypeSize(dtype);
  const std::size_t mine = counts[static_cast<std::size_t>(rank_)] * elem;
  std::vector<std::string> all;
  TFMPI_RETURN_IF_ERROR(
      world_->Exchange(rank_, std::string(static_cast<const char*>(in), mine), &all));
  char* dst = static_cast<char*>(out);
  for (std::size_t r = 0; r < all.size(); ++r) {
    TFMPI_ENFORCE_EQ(all[r].size(), counts[r] * elem);
    if (!all[r].empty()) std::memcpy(dst, all[r].data(), all[r].size());
    dst += all[r].size();
  }
  return Status::Ok();
}

Status InProcCommunicator::Reduce(const void* in, void* out, std::size_t count, DataType dtype,
                                  ReduceOp op, int root) {
  const std::size_t bytes = count * DataTypeSize(dtype);
  std::vector<std::string> all;
  TFMPI_RETURN_IF_ERROR(
      world_->Exchange(rank_, std::string(static_cast<const char*>(in), bytes), &all));
  if (rank_ != root || bytes == 0) return Status::Ok();
  std::memcpy(out, all[0].data(), bytes);
  for (std::size_t r = 1; r < all.size(); ++r) ReduceInto(out, all[r].data(), count, dtype, op);
  return Status::Ok();
}

Status InProcCommunicator::ReduceScatter(const void* in, void* out,
                                         const std::vector<std::size_t>& counts, DataType dtype,
                                         ReduceOp op) {
  const std::size_t elem = DataTypeSize(dtype);
  TFMPI_ENFORCE_EQ(counts.size(), static_cast<std::size_t>(world_->size()));
  std::size_t total = 0, before = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (static_cast<int>(r) < rank_) before += counts[r];
    total += counts[r];
  }
  std::vector<std::string> all;
  TFMPI_RETURN_IF_ERROR(
      world_->Exchange(rank_, std::string(static_cast<const char*>(in), total * elem), &all));
  const std::size_t mine = counts[static_cast<std::size_t>(rank_)];
  if (mine == 0) return Status::Ok();
  std::string sum = all[0].substr(before * elem, mine * elem);
  for (std::size_t r = 1; r < all.size(); ++r)
    ReduceInto(sum.data(), all[r].data() + before * elem, mine, dtype, op);
  std::memcpy(out, sum.data(), sum.size());
  return Status::Ok();
}

Status InProcCommunicator::Barrier() {
  std::vector<std::string> all;
  return world_->Exchange(rank_, "", &all);
}

Status InProcCommunicator::BitwiseAnd(std::uint64_t* words, std::size_t n) {
  std::vector<std::string> all;
  TFMPI_RETURN_IF_ERROR(world_->Exchange(
      rank_, std::string(reinterpret_cast<const char*>(words), n * sizeof(std::uint64_t)), &all));
  for (const std::string& other : all) {
    const auto* w = reinterpret_cast<const std::uint64_t*>(other.data());
    for (std::size_t i = 0; i < n; ++i) words[i] &= w[i];
  }
  return Status::Ok();
}

Status InProcCommunicator::GatherToRoot(const std::string& mine, std::vector<std::string>* all) {
  std::vector<std::string> got;
  TFMPI_RETURN_IF_ERROR(world_->Exchange(rank_, mine, &got));
  if (rank_ == 0) *all = std::move(got);
  else all->clear();
  return Status::Ok();
}

Status InProcCommunicator::BroadcastFromRoot(std::string* data) {
  std::vector<std::string> got;
  TFMPI_RETURN_IF_ERROR(world_->Exchange(rank_, rank_ == 0 ? *data : std::string(), &got));
  if (rank_ != 0) *data = std::move(got[0]);
  return Status::Ok();
}

}  // namespace tfmpi
