// ResponseCache: remembers recent successful decisions so steady-state
// negotiation is one small bitwise-AND allreduce per cycle.
//
// Note [Response cache]
// Every rank holds an identical cache: entries are only added (Put) for
// responses every rank received from the coordinator, and only touched
// (Touch) for responses every rank executes, in the same order everywhere, so
// bit positions and LRU eviction agree across ranks without communication.
// A rank whose pending request matches entry b sets bit b in its negotiation
// word; after the AND, set bits are ready on every rank.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tfmpi/engine/request.h"

namespace tfmpi {

class ResponseCache {
 public:
  explicit ResponseCache(std::size_t capacity);

  std::size_t capacity() const { return capacity_; }
  std::size_t size() const { return by_name_.size(); }

  // The bit of the entry that serves `meta` submitted by `rank`, if any.
  std::optional<std::size_t> Lookup(const TensorMeta& meta, int rank) const;
  // Whether the entry at `bit` serves `meta` submitted by `rank` (no lookup).
  bool Serves(std::size_t bit, const TensorMeta& meta, int rank) const;
  const Response& Get(std::size_t bit) const;
  // The same entry, shared (no copy), valid after later Put calls replace it.
  std::shared_ptr<const Response> Share(std::size_t bit) const;

  // Adds or replaces the entry for response.meta.name (evicting the least
  // recently used entry when full) and marks it most recently used.
  void Put(const Response& response);
  void Touch(std::size_t bit);

  // Changes whenever an existing bit is evicted or replaced, so callers can
  // keep looked-up bits until it moves.
  std::uint64_t generation() const { return generation_; }

 private:
  struct Entry {
    std::shared_ptr<const Response> response;
    std::list<std::size_t>::iterator lru_pos;
  };
  std::size_t capacity_;
  std::vector<std::optional<Entry>> entries_;  // indexed by bit
  std::unordered_map<std::string, std::size_t> by_name_;
  std::list<std::size_t> lru_;  // front: most recent
  std::vector<std::size_t> free_bits_;
  std::uint64_t generation_ = 0;
};

}  // namespace tfmpi
