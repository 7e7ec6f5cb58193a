#include "tfmpi/data/bytes_read.h"

#include <atomic>

namespace tfmpi::data {
namespace {
std::atomic<std::int64_t> g_bytes_read{0};
}  // namespace

std::int64_t BytesRead() { return g_bytes_read.load(std::memory_order_relaxed); }
void AddBytesRead(std::int64_t bytes) {
  g_bytes_read.fetch_add(bytes, std::memory_order_relaxed);
}

}  // namespace tfmpi::data
