#include "tfmpi/engine/response_cache.h"

#include "tfmpi/common/enforce.h"
#include "tfmpi/planning/negotiation.h"

namespace tfmpi {

ResponseCache::ResponseCache(std::size_t capacity) : capacity_(capacity), entries_(capacity) {
  for (std::size_t b = capacity; b > 0; --b) free_bits_.push_back(b - 1);  // pop lowest first
}

std::optional<std::size_t> ResponseCache::Lookup(const TensorMeta& meta, int rank) const {
  auto it = by_name_.find(meta.name);
  if (it == by_name_.end()) return std::nullopt;
  if (!planning::MatchesCachedResponse(meta, rank, *entries_[it->second]->response))
    return std::nullopt;
  return it->second;
}

bool ResponseCache::Serves(std::size_t bit, const TensorMeta& meta, int rank) const {
  return bit < entries_.size() && entries_[bit].has_value() &&
         planning::MatchesCachedResponse(meta, rank, *entries_[bit]->response);
}

const Response& ResponseCache::Get(std::size_t bit) const {
  TFMPI_ENFORCE(bit < entries_.size() && entries_[bit].has_value(), "no cache entry at bit {}", bit);
  return *entries_[bit]->response;
}

std::shared_ptr<const Response> ResponseCache::Share(std::size_t bit) const {
  TFMPI_ENFORCE(bit < entries_.size() && entries_[bit].has_value(), "no cache entry at bit {}", bit);
  return entries_[bit]->response;
}

void ResponseCache::Put(const Response& response) {
  if (capacity_ == 0 || !response.ok()) return;
  auto named = by_name_.find(response.meta.name);
  if (named != by_name_.end()) {  // replace in place
    Entry& e = *entries_[named->second];
    e.response = std::make_shared<const Response>(response);
    lru_.splice(lru_.begin(), lru_, e.lru_pos);
    ++generation_;
    return;
  }
  if (free_bits_.empty()) {  // evict the least recently used
    std::size_t victim = lru_.back();
    lru_.pop_back();
    by_name_.erase(entries_[victim]->response->meta.name);
    entries_[victim].reset();
    free_bits_.push_back(victim);
    ++generation_;
  }
  std::size_t bit = free_bits_.back();
  free_bits_.pop_back();
  lru_.push_front(bit);
  entries_[bit] = Entry{std::make_shared<const Response>(response), lru_.begin()};
  by_name_[response.meta.name] = bit;
}

void ResponseCache::Touch(std::size_t bit) {
  lru_.splice(lru_.begin(), lru_, entries_[bit]->lru_pos);  // iterators stay valid
}

}  // namespace tfmpi
