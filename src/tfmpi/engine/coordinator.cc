#include "tfmpi/engine/coordinator.h"

#include <fmt/format.h>

#include "tfmpi/common/enforce.h"
#include "tfmpi/planning/negotiation.h"
#include "tfmpi/planning/rank_groups.h"

namespace tfmpi {
namespace {

// Ranks that reported a tensor and ranks that did not; returns one report.
const TensorMeta* SplitRanks(const std::vector<std::optional<TensorMeta>>& per_rank,
                             std::vector<int>* have, std::vector<int>* missing) {
  const TensorMeta* any = nullptr;
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    if (per_rank[r]) {
      have->push_back(static_cast<int>(r));
      any = &*per_rank[r];
    } else {
      missing->push_back(static_cast<int>(r));
    }
  }
  return any;
}

// "rank 1 is" / "ranks 1, 3 are" / "ranks 0-62, 64 are": runs of consecutive
// ranks are ranges, so that a stall of most of 1,000 ranks does not list each.
std::string Ranks(const std::vector<int>& ranks, const char* one, const char* many) {
  return fmt::format("{} {}", planning::RankPhrase(ranks), ranks.size() == 1 ? one : many);
}

}  // namespace

void Coordinator::Ingest(int rank, const std::vector<TensorMeta>& metas, Clock::time_point now) {
  if (!metas.empty()) heard_from_[static_cast<std::size_t>(rank)] = true;
  for (const TensorMeta& meta : metas) {
    auto [it, inserted] = table_.try_emplace(meta.name);
    Entry& e = it->second;
    if (inserted) {
      e.per_rank.resize(static_cast<std::size_t>(size_));
      e.first_report = now;
    }
    auto& slot = e.per_rank[static_cast<std::size_t>(rank)];
    TFMPI_ENFORCE(!slot.has_value(), "rank {} reported tensor '{}' twice", rank, meta.name);
    slot = meta;
    if (++e.reported == size_) complete_.push_back(meta.name);
  }
}

std::vector<Response> Coordinator::TakeDecided() {
  std::vector<Response> out;
  if (!complete_.empty()) all_blocked_ = false;  // progress
  for (const std::string& name : complete_) {
    auto it = table_.find(name);
    std::vector<TensorMeta> metas;
    for (auto& m : it->second.per_rank) metas.push_back(std::move(*m));
    out.push_back(planning::DecideResponse(metas));
    table_.erase(it);
  }
  complete_.clear();
  return out;
}

void Coordinator::Withdraw(int rank) {
  for (auto it = table_.begin(); it != table_.end();) {
    auto& slot = it->second.per_rank[static_cast<std::size_t>(rank)];
    if (slot) {
      slot.reset();
      --it->second.reported;
    }
    it = it->second.reported == 0 ? table_.erase(it) : std::next(it);
  }
}

std::vector<std::string> Coordinator::NewStalls(Clock::time_point now, Clock::duration after) {
  std::vector<std::string> out;
  std::vector<bool> pending;  // WaitingRanks(), made once a stall is found
  for (auto& [name, e] : table_) {
    if (e.stall_reported || e.reported == size_ || now - e.first_report < after) continue;
    e.stall_reported = true;
    if (pending.empty()) pending = WaitingRanks();
    std::vector<int> have, missing;
    const TensorMeta* any = SplitRanks(e.per_rank, &have, &missing);
    double secs = std::chrono::duration<double>(now - e.first_report).count();
    // What each missing rank is doing: never reported (starting), waiting on
    // other tensors (another branch), or nothing pending (busy elsewhere).
    std::vector<int> starting, elsewhere, busy;
    for (int r : missing) {
      if (!heard_from_[static_cast<std::size_t>(r)])
        starting.push_back(r);
      else if (pending[static_cast<std::size_t>(r)])
        elsewhere.push_back(r);
      else
        busy.push_back(r);
    }
    std::string why;
    if (!elsewhere.empty())
      why += fmt::format(
          "; {} waiting on other collectives: check that every rank submits it (same name, "
          "same order of control flow)",
          Ranks(elsewhere, "is", "are"));
    if (!busy.empty())
      why += fmt::format(
          "; {} no collective pending: still busy before it (a slow host, a long first trace), "
          "or the program skipped this collective there",
          Ranks(busy, "has", "have"));
    if (!starting.empty())
      why += fmt::format(
          "; {} not submitted any collective yet: still starting (a host with little CPU "
          "can take minutes to import TensorFlow), or stopped before its first collective",
          Ranks(starting, "has", "have"));
    out.push_back(fmt::format("tensor '{}' ({}) submitted by {} has waited {:.0f} s for {}{}", name,
                              DescribeMeta(*any), planning::RankPhrase(have), secs,
                              planning::RankPhrase(missing), why));
  }
  return out;
}

std::vector<bool> Coordinator::WaitingRanks() const {
  std::vector<bool> waiting(static_cast<std::size_t>(size_), false);
  for (const auto& [name, e] : table_) {
    if (e.reported == size_) continue;  // complete (decided this round), not waited on
    for (std::size_t r = 0; r < e.per_rank.size(); ++r)
      if (e.per_rank[r]) waiting[r] = true;
  }
  return waiting;
}

std::vector<Response> Coordinator::TakeDeadlocked(Clock::time_point now, Clock::duration after) {
  const std::vector<bool> waiting = WaitingRanks();
  bool everyone = !table_.empty();
  for (bool w : waiting) everyone = everyone && w;
  if (!everyone) {
    all_blocked_ = false;
    return {};
  }
  if (!all_blocked_) {
    all_blocked_ = true;
    all_blocked_since_ = now;
  }
  if (now - all_blocked_since_ < after) return {};
  std::vector<Response> out;
  const double secs = std::chrono::duration<double>(now - all_blocked_since_).count();
  for (auto& [name, e] : table_) {
    std::vector<int> have, missing;
    const TensorMeta* any = SplitRanks(e.per_rank, &have, &missing);
    Response resp;
    resp.meta = *any;
    resp.error = fmt::format(
        "tensor '{}' ({}) submitted by {} was never submitted by {}, and every rank has "
        "been waiting for {:.0f} s for collectives the others do not submit: the ranks ran "
        "different sequences of collectives (for example different numbers of steps, because "
        "their data differed). Every rank must see the same number of batches.",
        name, DescribeMeta(*any), planning::RankPhrase(have), planning::RankPhrase(missing),
        secs);
    out.push_back(std::move(resp));
  }
  table_.clear();
  all_blocked_ = false;
  return out;
}

}  // namespace tfmpi
