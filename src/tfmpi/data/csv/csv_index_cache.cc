#include "tfmpi/data/csv/csv_index_cache.h"

#include <deque>
#include <mutex>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "tfmpi/data/csv/csv_index.h"

namespace tfmpi::data {
namespace {

constexpr std::size_t kCachedIndexes = 8;

struct Cache {
  std::mutex mu;
  std::deque<std::pair<std::string, std::shared_ptr<const CsvIndex>>> entries;  // newest first
};

Cache& TheCache() {
  static Cache* cache = new Cache();  // never destroyed: kernels may outlive statics
  return *cache;
}

}  // namespace

Status SharedCsvIndex(const PosixFile& file, std::size_t buffer_bytes,
                      std::shared_ptr<const CsvIndex>* out) {
  const std::string key = fmt::format("{}:{}", file.version(), file.size());
  Cache& cache = TheCache();
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    for (const auto& [k, index] : cache.entries) {
      if (k == key) {
        *out = index;
        return Status::Ok();
      }
    }
  }
  auto index = std::make_shared<CsvIndex>();
  TFMPI_RETURN_IF_ERROR(BuildCsvIndex(file, buffer_bytes, index.get()));
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    cache.entries.emplace_front(key, index);
    if (cache.entries.size() > kCachedIndexes) cache.entries.pop_back();
  }
  *out = std::move(index);
  return Status::Ok();
}

}  // namespace tfmpi::data
