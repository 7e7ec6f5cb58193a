// One tensor beyond MPI's int counts: an in-place allreduce (sum) of a uint8
// tensor of 2^31 + 16 elements, which the MPI transport must split at
// max_message_elements (INT_MAX by default). Registered for two ranks
// (2 GiB of tensor per rank); the expectation holds for any number of ranks.
#include <chrono>
#include <climits>
#include <cstdint>

#include "mpi_test_util.h"

namespace tfmpi::mpitest {
namespace {

constexpr std::int64_t kElements = (std::int64_t{1} << 31) + 16;

std::uint8_t Input(int rank, std::int64_t i) { return static_cast<std::uint8_t>((i + 3 * rank) & 63); }

std::uint8_t Expected(int size, std::int64_t i) {
  unsigned sum = 0;
  for (int q = 0; q < size; ++q) sum += Input(q, i);
  return static_cast<std::uint8_t>(sum);  // uint8 sums wrap modulo 256
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

void TestHugeAllreduce(MpiTest& t) {
  const int K = t.size(), r = t.rank();
  auto start = std::chrono::steady_clock::now();
  Tensor x(DataType::kUInt8, {kElements});
  auto* p = static_cast<std::uint8_t*>(x.data());
  for (std::int64_t i = 0; i < kElements; ++i) p[i] = Input(r, i);
  t.Note(fmt::format("filled {} bytes in {:.1f} s", kElements, Seconds(start)));

  start = std::chrono::steady_clock::now();
  Status s = t.Run(AllreduceRequest("huge.allreduce", ReduceOp::kSum, x, &x));
  t.Note(fmt::format("allreduce of 2^31 + 16 uint8 took {:.1f} s", Seconds(start)));
  if (!t.ExpectOk(s, "huge.allreduce")) return;

  // A sample: the start, the end (which holds both sides of the first chunk
  // boundary at INT_MAX elements), and a stride through the whole tensor.
  std::vector<std::int64_t> sample;
  const std::int64_t edge = 1 << 16;
  for (std::int64_t i = 0; i < edge; ++i) sample.push_back(i);
  for (std::int64_t i = std::int64_t{INT_MAX} - edge; i < kElements; ++i) sample.push_back(i);
  for (std::int64_t i = 0; i < kElements; i += 4099) sample.push_back(i);
  std::int64_t bad = 0;
  for (std::int64_t i : sample) {
    if (p[i] == Expected(K, i)) continue;
    if (++bad <= 3)
      t.Fail(fmt::format("huge.allreduce: element {} is {}, expected {}", i, p[i], Expected(K, i)));
  }
  t.Expect(bad == 0, "huge.allreduce: {} of {} sampled elements wrong", bad, sample.size());
  t.Note(fmt::format("checked {} sampled elements", sample.size()));
}

}  // namespace
}  // namespace tfmpi::mpitest

int main() {
  using namespace tfmpi::mpitest;
  MpiTest t("huge_tensor_test", tfmpi::EngineOptions{});
  TestHugeAllreduce(t);
  return t.Finish();
}
