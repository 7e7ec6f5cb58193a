#include "tfmpi/engine/negotiator.h"

#include "tfmpi/common/enforce.h"
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
      words_((kFirstCacheBit + options.cache_capacity + 63) / 64),
      slot_of_bit_(options.cache_capacity, nullptr) {
  if (comm_->rank() == 0) coordinator_ = std::make_unique<Coordinator>(comm_->size());
}

void Negotiator::ForgetBits() {  // no slot pointer outlives its cycle
  for (std::size_t b : bits_set_) slot_of_bit_[b] = nullptr;
  bits_set_.clear();
}

Status Negotiator::Negotiate(PendingTable* pending, bool want_shutdown,
                             const std::string& exit_reason, NegotiationResult* out) {
  ForgetBits();  // after a failed AND
  out->responses.clear();
  out->slots.clear();
  out->shutdown = false;
  out->peer_leaving = false;
  out->full_round = false;
  out->all_idle = false;
  out->cache_hits = 0;
  std::fill(words_.begin(), words_.end(), 0);
  const Clock::time_point now = Clock::now();
  bool quiet = true;
  const int rank = comm_->rank();
  pending->ForEach([&](NameSlot& slot) {
    PendingRequest& p = slot.entry;
    if (p.reported) { quiet = false; return; }
    // Note [Pending slots]: a bit remembered from this name's last request
    // still names its entry while the generation holds, but this request's
    // meta may differ: checked once per request.
    const std::uint64_t admission = p.request.hold.admission;
    if (p.bit_generation != cache_.generation()) {
      p.bit = cache_.Lookup(p.request.meta, rank);
      p.bit_generation = cache_.generation();
    } else if (p.bit_checked_for != admission &&
               (!p.bit || !cache_.Serves(*p.bit, p.request.meta, rank))) {
      p.bit = cache_.Lookup(p.request.meta, rank);  // a miss may be cached by now
    }
    p.bit_checked_for = admission;
    if (!p.bit) { quiet = false; return; }
    if (now - p.request.submitted > options_.promote_after) { quiet = false; return; }
    SetBit(words_, kFirstCacheBit + *p.bit);
    slot_of_bit_[*p.bit] = &slot;
    bits_set_.push_back(*p.bit);
  });
  if (want_shutdown && !leave_announced_) quiet = false;  // the leave notice needs a full round
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
      // Every rank set this bit, this one too, this cycle, for a pending request.
      NameSlot* slot = slot_of_bit_[b];
      TFMPI_ENFORCE(slot && slot->index != NameSlot::kNotPending && slot->entry.bit == b,
                    "cache bit {} is set after the negotiation AND but no request of this "
                    "rank set it", b);
      out->slots.push_back(slot);
    }
  }
  ForgetBits();
  out->cache_hits = out->responses.size();
  out->shutdown = TestBit(words_, kShutdownBit);
  out->peer_leaving = !TestBit(words_, kStayingBit);
  out->all_idle = TestBit(words_, kIdleBit);
  if (TestBit(words_, kQuietBit)) return Status::Ok();

  // Full round. Requests served by the cache this cycle are not reported.
  out->full_round = true;
  auto mark_hits = [&](bool served) {
    for (NameSlot* slot : out->slots) slot->entry.served = served;
  };
  std::vector<Response> decided;
  mark_hits(true);
  Status s;
  try {
    s = FullRound(pending, want_shutdown, exit_reason, &decided);
  } catch (...) {
    mark_hits(false);
    throw;
  }
  mark_hits(false);
  TFMPI_RETURN_IF_ERROR(s);
  for (Response& r : decided) {
    cache_.Put(r);
    out->slots.push_back(pending->FindByName(r.meta.name));
    out->responses.push_back(std::make_shared<const Response>(std::move(r)));
  }
  return Status::Ok();
}

Status Negotiator::FullRound(PendingTable* pending, bool want_shutdown,
                             const std::string& exit_reason, std::vector<Response>* decided) {
  wire::RankReport mine;
  pending->ForEach([&](NameSlot& slot) {
    PendingRequest& p = slot.entry;
    if (p.reported || p.served) return;
    p.reported = true;
    mine.metas.push_back(p.request.meta);
  });
  mine.leaving = want_shutdown && !leave_announced_;
  if (mine.leaving) mine.exit_reason = exit_reason;
  std::vector<std::string> all;
  TFMPI_RETURN_IF_ERROR(comm_->GatherToRoot(wire::EncodeReport(mine), &all));
  if (mine.leaving) leave_announced_ = true;
  std::string encoded;
  if (coordinator_) {
    const Clock::time_point now = Clock::now();
    std::vector<wire::RankReport> reports(all.size());
    for (std::size_t r = 0; r < all.size(); ++r)
      TFMPI_RETURN_IF_ERROR(wire::DecodeReport(all[r], &reports[r]));
    wire::Decisions decisions;
    for (std::size_t r = 0; r < reports.size(); ++r) {
      if (!reports[r].leaving) continue;
      // A rank that stops with an error will not run what it reported before
      // (Note [Ranks that stop early]): nothing may be decided with it.
      if (!reports[r].exit_reason.empty()) coordinator_->Withdraw(static_cast<int>(r));
      decisions.leaving.push_back({static_cast<int>(r), std::move(reports[r].exit_reason)});
    }
    for (std::size_t r = 0; r < reports.size(); ++r)
      coordinator_->Ingest(static_cast<int>(r), reports[r].metas, now);
    if (options_.stall_warning.count() > 0)
      for (const std::string& msg : coordinator_->NewStalls(now, options_.stall_warning))
        TFMPI_LOG_WARNING("{}", msg);
    decisions.responses = coordinator_->TakeDecided();
    for (Response& r : coordinator_->TakeDeadlocked(now, options_.deadlock_timeout)) {
      TFMPI_LOG_ERROR("{}", r.error);
      decisions.responses.push_back(std::move(r));
    }
    encoded = wire::EncodeDecisions(decisions);
  }
  TFMPI_RETURN_IF_ERROR(comm_->BroadcastFromRoot(&encoded));
  wire::Decisions decisions;
  TFMPI_RETURN_IF_ERROR(wire::DecodeDecisions(encoded, &decisions));
  for (wire::LeaveNotice& n : decisions.leaving) leavers_[n.rank] = std::move(n.exit_reason);
  *decided = std::move(decisions.responses);
  return Status::Ok();
}

}  // namespace tfmpi
