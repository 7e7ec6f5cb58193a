#include "tfmpi/engine/negotiator.h"

#include "tfmpi/common/logging.h"
#include "tfmpi/engine/wire.h"

namespace tfmpi {
namespace {
constexpr std::size_t kQuietBit = 0;
constexpr std::size_t kShutdownBit = 1;
constexpr std::size_t kStayingBit = 2;
constexpr std::size_t kIdleBit = 3;
constexpr std::size_t kFirstCacheBit = 4;

void SetBit(std::vector<std::uint64_t>& w, std::size_t b) { w[b / 64] |= std::uint64_t{1} << (b % 64); }
bool TestBit(const std::vector<std::uint64_t>& w, std::size_t b) {
  return (w[b / 64] >> (b % 64)) & 1u;
}
}  // namespace

Negotiator::Negotiator(Communicator* comm, const NegotiationOptions& options)
    : comm_(comm),
      options_(options),
      cache_(options.cache_capacity),
      words_((kFirstCacheBit + options.cache_capacity + 63) / 64) {
  if (comm_->rank() == 0) coordinator_ = std::make_unique<Coordinator>(comm_->size());
}

Status Negotiator::Negotiate(PendingTable* pending, bool want_shutdown, NegotiationResult* out) {
  out->responses.clear();
  out->shutdown = false;
  out->peer_leaving = false;
  out->full_round = false;
  out->all_idle = false;
  out->cache_hits = 0;
  std::fill(words_.begin(), words_.end(), 0);
  const Clock::time_point now = Clock::now();
  bool quiet = true;
  for (auto& [name, p] : *pending) {
    if (p.reported) { quiet = false; continue; }
    if (p.bit_generation != cache_.generation()) {
      p.bit = cache_.Lookup(p.request.meta, comm_->rank());
      p.bit_generation = cache_.generation();
    }
    if (!p.bit) { quiet = false; continue; }
    if (now - p.request.submitted > options_.promote_after) { quiet = false; continue; }
    SetBit(words_, kFirstCacheBit + *p.bit);
  }
  if (quiet) SetBit(words_, kQuietBit);
  if (want_shutdown) SetBit(words_, kShutdownBit);
  else SetBit(words_, kStayingBit);
  if (pending->empty()) SetBit(words_, kIdleBit);

  TFMPI_RETURN_IF_ERROR(comm_->BitwiseAnd(words_.data(), words_.size()));
  out->synced_at = Clock::now();

  // Cache hits, in bit order: identical on every rank. Whole zero words are
  // skipped, so a mostly idle cache costs a few compares.
  for (std::size_t w = kFirstCacheBit / 64; w < words_.size(); ++w) {
    std::uint64_t word = words_[w];
    if (w == kFirstCacheBit / 64) word &= ~std::uint64_t{0} << (kFirstCacheBit % 64);
    while (word) {
      const std::size_t b = w * 64 + static_cast<std::size_t>(__builtin_ctzll(word)) - kFirstCacheBit;
      word &= word - 1;
      cache_.Touch(b);
      out->responses.push_back(cache_.Share(b));
    }
  }
  out->cache_hits = out->responses.size();
  out->shutdown = TestBit(words_, kShutdownBit);
  out->peer_leaving = !TestBit(words_, kStayingBit);
  out->all_idle = TestBit(words_, kIdleBit);
  if (TestBit(words_, kQuietBit)) return Status::Ok();

  // Full round. Requests served by the cache this cycle are not reported.
  out->full_round = true;
  PendingTable hits;
  for (const auto& r : out->responses) hits.insert(pending->extract(r->meta.name));
  std::vector<Response> decided;
  Status s = FullRound(pending, &decided);
  pending->merge(hits);
  TFMPI_RETURN_IF_ERROR(s);
  for (Response& r : decided) {
    cache_.Put(r);
    out->responses.push_back(std::make_shared<const Response>(std::move(r)));
  }
  return Status::Ok();
}

Status Negotiator::FullRound(PendingTable* pending, std::vector<Response>* decided) {
  std::vector<TensorMeta> mine;
  for (auto& [name, p] : *pending) {
    if (p.reported) continue;
    p.reported = true;
    mine.push_back(p.request.meta);
  }
  std::vector<std::string> all;
  TFMPI_RETURN_IF_ERROR(comm_->GatherToRoot(wire::EncodeMetas(mine), &all));
  std::string encoded;
  if (coordinator_) {
    const Clock::time_point now = Clock::now();
    for (std::size_t r = 0; r < all.size(); ++r) {
      std::vector<TensorMeta> metas;
      TFMPI_RETURN_IF_ERROR(wire::DecodeMetas(all[r], &metas));
      coordinator_->Ingest(static_cast<int>(r), metas, now);
    }
    if (options_.stall_warning.count() > 0)
      for (const std::string& msg : coordinator_->NewStalls(now, options_.stall_warning))
        TFMPI_LOG_WARNING("{}", msg);
    std::vector<Response> decided_now = coordinator_->TakeDecided();
    for (Response& r : coordinator_->TakeDeadlocked(now, options_.deadlock_timeout)) {
      TFMPI_LOG_ERROR("{}", r.error);
      decided_now.push_back(std::move(r));
    }
    encoded = wire::EncodeResponses(decided_now);
  }
  TFMPI_RETURN_IF_ERROR(comm_->BroadcastFromRoot(&encoded));
  return wire::DecodeResponses(encoded, decided);
}

}  // namespace tfmpi
