#include "tfmpi/planning/autotune.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "tfmpi/common/types.h"

namespace tfmpi::planning {
namespace {

std::string Bytes(std::size_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= (1u << 10) && b % (1u << 10) == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

// `values` with `start` added, sorted, without duplicates.
std::vector<std::size_t> WithStart(std::vector<std::size_t> values, std::size_t start) {
  values.push_back(start);
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

}  // namespace

std::string Describe(const TuningPoint& p) {
  return fmt::format("message {} elements, direct {}, fusion {}", p.message_elements,
                     Bytes(p.direct_threshold), Bytes(p.fusion_threshold));
}

double Median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::infinity();
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

bool SamePlan(const std::vector<std::vector<FusionItem>>& cycles, const TuningPoint& a,
              const TuningPoint& b) {
  if (cycles.empty()) return false;  // nothing seen: unknown
  const FusionOptions fa{a.fusion_threshold, a.direct_threshold};
  const FusionOptions fb{b.fusion_threshold, b.direct_threshold};
  const std::size_t shorter = std::min(a.message_elements, b.message_elements);
  for (const std::vector<FusionItem>& items : cycles) {
    const auto groups = PlanFusion(items, fa);
    if (groups != PlanFusion(items, fb)) return false;
    if (a.message_elements == b.message_elements) continue;
    for (const auto& group : groups) {
      const FusionItem& first = items[group.front()];
      if (first.error || first.kind == CollectiveKind::kBarrier) continue;
      // An allgather's length depends on every rank's share: not known here.
      if (first.kind == CollectiveKind::kAllgather) return false;
      std::size_t bytes = 0;
      for (std::size_t i : group) bytes += items[i].bytes;
      // Broadcasts go to the transport as bytes (Executor::RunBroadcast).
      const std::size_t count =
          first.kind == CollectiveKind::kBroadcast ? bytes : bytes / DataTypeSize(first.dtype);
      if (count > shorter) return false;  // chunked differently
    }
  }
  return true;
}

TunerOptions DefaultTunerOptions(const TuningPoint& start, bool tune_message, bool tune_direct,
                                 bool tune_fusion) {
  TunerOptions o;
  o.start = start;
  // Message sizes from 256 KiB to 64 MiB of float32 (docs/performance.md,
  // "How big an MPI call": 256 KiB-4 MiB measured best on shared memory).
  if (tune_message) o.message_elements = {65536, 262144, 1048576, 4194304, 16777216};
  if (tune_direct) o.direct_thresholds = {256u << 10, 1u << 20, 4u << 20, 16u << 20};
  if (tune_fusion) o.fusion_thresholds = {4u << 20, 16u << 20, 64u << 20};
  return o;
}

Tuner::Tuner(TunerOptions options) : options_(std::move(options)) {
  options_.samples = std::max(1, options_.samples);
  best_ = current_ = options_.start;
  const Dimension all[] = {
      {"message size", options_.message_elements, &TuningPoint::message_elements},
      {"direct threshold", options_.direct_thresholds, &TuningPoint::direct_threshold},
      {"fusion threshold", options_.fusion_thresholds, &TuningPoint::fusion_threshold},
  };
  for (const Dimension& d : all) {
    if (d.values.empty()) continue;
    std::vector<std::size_t> values = WithStart(d.values, options_.start.*d.field);
    if (values.size() > 1) dims_.push_back({d.name, std::move(values), d.field});
  }
  if (dims_.empty()) {
    done_ = true;
    phase_ = "done";
  } else {
    StartDimension();
  }
}

void Tuner::StartDimension() {
  for (; dim_ < dims_.size(); ++dim_) {
    const Dimension& d = dims_[dim_];
    const std::size_t baseline = best_.*d.field;
    queue_ = {baseline};
    for (std::size_t v : d.values)
      if (v != baseline) queue_.push_back(v);
    bool any = false;  // a candidate that runs other calls than the baseline
    for (std::size_t i = 1; i < queue_.size() && !any; ++i) {
      TuningPoint p = best_;
      p.*d.field = queue_[i];
      any = !Same(p, best_);
    }
    if (!any) {
      skipped_ += static_cast<int>(queue_.size()) - 1;
      continue;
    }
    next_value_ = 0;
    window_scores_.clear();
    best_value_ = baseline;
    best_score_ = std::numeric_limits<double>::infinity();
    phase_ = d.name;
    current_ = best_;
    return;
  }
  if (best_ != options_.start && !Same(best_, options_.start)) {
    StartConfirm();
  } else {
    best_ = options_.start;
    Finish();
  }
}

void Tuner::NextCandidate() {
  const Dimension& d = dims_[dim_];
  for (; next_value_ < queue_.size(); ++next_value_) {
    TuningPoint p = best_;  // best_ holds this dimension's baseline until it ends
    p.*d.field = queue_[next_value_];
    if (!Same(p, best_)) {
      current_ = p;
      return;
    }
    ++skipped_;
  }
  EndDimension();
}

void Tuner::EndDimension() {
  best_.*dims_[dim_].field = best_value_;
  ++dim_;
  StartDimension();
}

void Tuner::StartConfirm() {
  phase_ = "confirm";
  confirm_start_.clear();
  confirm_best_.clear();
  current_ = options_.start;
}

bool Tuner::Record(double score) {
  if (done_) return false;
  const TuningPoint before = current_;
  if (phase_ == "confirm") {
    (current_ == options_.start ? confirm_start_ : confirm_best_).push_back(score);
    const std::size_t n = static_cast<std::size_t>(options_.samples);
    if (confirm_start_.size() >= n && confirm_best_.size() >= n) {
      Finish();  // decides between the two
    } else {
      current_ = current_ == options_.start ? best_ : options_.start;
    }
    return current_ != before;
  }
  window_scores_.push_back(score);
  const bool rejected = next_value_ > 0 && window_scores_.size() == 1 &&
                        score > baseline_score_ * options_.reject_factor;
  if (!rejected && window_scores_.size() < static_cast<std::size_t>(options_.samples))
    return false;
  const double m = Median(window_scores_);
  window_scores_.clear();
  if (next_value_ == 0) {
    baseline_score_ = best_score_ = m;
  } else if (m < baseline_score_ * (1 - options_.min_gain) && m < best_score_) {
    best_value_ = queue_[next_value_];
    best_score_ = m;
  }
  ++next_value_;
  NextCandidate();
  return current_ != before;
}

void Tuner::Finish() {
  // A point other than the start stays only after a complete confirmation
  // measured it faster by min_gain; stopped earlier (the time bound), the
  // search keeps the start.
  const std::size_t n = static_cast<std::size_t>(options_.samples);
  const bool confirmed = phase_ == "confirm" && confirm_start_.size() >= n &&
                         confirm_best_.size() >= n &&
                         Median(confirm_best_) < Median(confirm_start_) * (1 - options_.min_gain);
  if (!done_ && !confirmed) best_ = options_.start;
  done_ = true;
  phase_ = "done";
  current_ = best_;
}

}  // namespace tfmpi::planning
