#include "tfmpi/planning/shares.h"

#include <algorithm>
#include <cmath>

#include "tfmpi/common/enforce.h"

namespace tfmpi::planning {

std::vector<double> ShareFractions(const std::vector<double>& speeds) {
  TFMPI_ENFORCE(!speeds.empty(), "share fractions need at least one rank");
  double total = 0;
  std::vector<double> out(speeds.size(), 0.0);
  for (std::size_t i = 0; i < speeds.size(); ++i) {
    if (std::isfinite(speeds[i]) && speeds[i] > 0) {
      out[i] = speeds[i];
      total += speeds[i];
    }
  }
  if (!(total > 0) || !std::isfinite(total)) {
    std::fill(out.begin(), out.end(), 1.0 / static_cast<double>(speeds.size()));
    return out;
  }
  for (double& f : out) f /= total;
  return out;
}

std::vector<double> Cuts(const std::vector<double>& fractions) {
  TFMPI_ENFORCE(!fractions.empty(), "cuts need at least one rank");
  std::vector<double> cuts(fractions.size() + 1, 0.0);
  for (std::size_t i = 0; i + 1 < fractions.size(); ++i) {
    cuts[i + 1] = std::min(1.0, cuts[i] + std::max(0.0, fractions[i]));
  }
  cuts.back() = 1.0;
  return cuts;
}

std::vector<std::int64_t> SliceBounds(const std::vector<double>& fractions, std::int64_t batch) {
  TFMPI_ENFORCE(batch >= 0, "negative batch size {}", batch);
  const std::vector<double> cuts = Cuts(fractions);
  std::vector<std::int64_t> bounds(cuts.size(), 0);
  // The formula the compiled step evaluates on the same cuts (Note [Work shares]).
  for (std::size_t i = 0; i < cuts.size(); ++i) {
    bounds[i] = static_cast<std::int64_t>(std::floor(static_cast<double>(batch) * cuts[i] + 0.5));
  }
  // Every slice has a row when the batch has N rows or more.
  const std::int64_t n = static_cast<std::int64_t>(fractions.size());
  if (batch >= n) {
    for (std::size_t i = 1; i < bounds.size(); ++i) bounds[i] = std::max(bounds[i], bounds[i - 1] + 1);
    for (std::size_t i = bounds.size(); i-- > 0;) {
      bounds[i] = std::min(bounds[i], batch - (n - static_cast<std::int64_t>(i)));
    }
  }
  return bounds;
}

std::vector<std::int64_t> SliceSizes(const std::vector<double>& fractions, std::int64_t batch) {
  const std::vector<std::int64_t> bounds = SliceBounds(fractions, batch);
  std::vector<std::int64_t> sizes(fractions.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) sizes[i] = bounds[i + 1] - bounds[i];
  return sizes;
}

double PredictedStepSeconds(const std::vector<double>& fractions, std::int64_t batch,
                            const std::vector<double>& seconds_per_sample) {
  TFMPI_ENFORCE_EQ(fractions.size(), seconds_per_sample.size());
  const std::vector<std::int64_t> sizes = SliceSizes(fractions, batch);
  double worst = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    worst = std::max(worst, static_cast<double>(sizes[i]) * seconds_per_sample[i]);
  }
  return worst;
}

Rebalancer::Rebalancer(std::vector<double> fractions, RebalanceOptions options)
    : fractions_(std::move(fractions)), per_sample_(fractions_.size(), 0.0), options_(options) {
  TFMPI_ENFORCE(!fractions_.empty(), "a rebalancer needs at least one rank");
  TFMPI_ENFORCE(options_.smoothing > 0 && options_.smoothing <= 1,
                "smoothing must be in (0, 1], got {}", options_.smoothing);
  TFMPI_ENFORCE(options_.hold >= 0, "hold must be >= 0, got {}", options_.hold);
  hold_next_ = options_.hold;
}

namespace {

// Whether rank i's numbers are a measurement (a rank with no samples gives none).
bool Measured(double seconds, std::int64_t samples) {
  return samples > 0 && std::isfinite(seconds) && seconds >= 0;
}

}  // namespace

std::vector<double> Rebalancer::Window(const std::vector<double>& seconds,
                                       const std::vector<std::int64_t>& samples) {
  std::vector<double> out(seconds.size(), 0.0);
  for (std::size_t i = 0; i < seconds.size(); ++i) {
    if (Measured(seconds[i], samples[i])) out[i] = seconds[i] / static_cast<double>(samples[i]);
  }
  return out;
}

std::vector<double> Rebalancer::Estimate(const std::vector<double>& per_sample) {
  double slowest = 0;
  for (double t : per_sample) slowest = std::max(slowest, t);
  if (!(slowest > 0)) return {};
  std::vector<double> estimate(per_sample.size());
  for (std::size_t i = 0; i < per_sample.size(); ++i) estimate[i] = per_sample[i] > 0 ? per_sample[i] : slowest;
  return estimate;
}

bool Rebalancer::Favours(const std::vector<double>& proposed, const std::vector<double>& current,
                         const std::vector<double>& per_sample, std::int64_t batch, double gain) {
  const std::vector<double> estimate = Estimate(per_sample);
  if (estimate.empty()) return false;
  return PredictedStepSeconds(proposed, batch, estimate) <
         PredictedStepSeconds(current, batch, estimate) * (1 - gain);
}

bool Rebalancer::FollowsTrial(const std::vector<std::int64_t>& samples) const {
  double total = 0;
  for (std::int64_t s : samples) total += static_cast<double>(std::max<std::int64_t>(s, 0));
  if (!(total > 0)) return false;
  double to_new = 0, to_old = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const double f = static_cast<double>(std::max<std::int64_t>(samples[i], 0)) / total;
    to_new += std::abs(f - fractions_[i]);
    to_old += std::abs(f - before_trial_[i]);
  }
  return to_new < to_old;
}

bool Rebalancer::Observe(const std::vector<double>& seconds,
                         const std::vector<std::int64_t>& samples, std::int64_t batch) {
  TFMPI_ENFORCE_EQ(seconds.size(), fractions_.size());
  TFMPI_ENFORCE_EQ(samples.size(), fractions_.size());
  // The step measured: the slowest rank's seconds per batch of `batch`.
  double total = 0, slowest_seconds = 0;
  for (std::size_t i = 0; i < seconds.size(); ++i) {
    if (!Measured(seconds[i], samples[i])) continue;
    total += static_cast<double>(samples[i]);
    slowest_seconds = std::max(slowest_seconds, seconds[i]);
  }
  const double step = batch > 0 && total > 0 ? slowest_seconds * static_cast<double>(batch) / total : 0;
  const std::vector<double> window = Window(seconds, samples);
  std::vector<double> previous = std::move(last_window_);
  last_window_ = window;
  awaiting_confirmation_ = false;
  if (!before_trial_.empty() && step > 0 && FollowsTrial(samples)) {
    const bool paid = step < step_before_trial_ * (1 - options_.min_gain / 2);
    // Much slower: a host became busy while the change was on trial, or the
    // change was wrong. Note [Changes on trial]: kept unless this window
    // itself predicts the step faster with the shares before.
    const bool much_slower = step > step_before_trial_ * (1 + 2 * options_.min_gain);
    const bool wrong = much_slower && Favours(before_trial_, fractions_, window, batch, 0);
    if (!paid && (!much_slower || wrong)) {  // undo it, and wait longer each time
      step_at_hold_ = wrong ? PredictedStepSeconds(before_trial_, batch, Estimate(window))
                            : step_before_trial_;
      fractions_ = std::move(before_trial_);
      before_trial_.clear();
      hold_left_ = hold_next_;
      hold_next_ = std::min(hold_next_ * 2, options_.hold * 16);
      return true;
    }
    before_trial_.clear();
    hold_next_ = options_.hold;
  }
  for (std::size_t i = 0; i < seconds.size(); ++i) {
    if (!Measured(seconds[i], samples[i])) continue;
    per_sample_[i] = per_sample_[i] > 0
                         ? options_.smoothing * window[i] + (1 - options_.smoothing) * per_sample_[i]
                         : window[i];
  }
  if (!before_trial_.empty()) return false;  // the last change is not measured yet
  if (hold_left_ > 0 && step > step_at_hold_ * (1 + 2 * options_.min_gain)) {
    hold_left_ = 0;  // the step got slower since the hold began: something changed
    hold_next_ = options_.hold;
  }
  if (hold_left_ > 0) {
    --hold_left_;
    return false;
  }
  const std::vector<double> estimate = Estimate(per_sample_);
  if (estimate.empty()) return false;
  std::vector<double> speeds(estimate.size());
  for (std::size_t i = 0; i < estimate.size(); ++i) speeds[i] = 1.0 / estimate[i];
  std::vector<double> proposed = ShareFractions(speeds);
  if (!Favours(proposed, fractions_, per_sample_, batch, options_.min_gain)) return false;
  // Note [Confirmed changes]: this window and the one before it must each
  // point the same way.
  const bool this_window = Favours(proposed, fractions_, window, batch, options_.min_gain / 2);
  if (!this_window || !Favours(proposed, fractions_, previous, batch, options_.min_gain / 2)) {
    awaiting_confirmation_ = this_window;
    return false;
  }
  if (step > 0) {
    before_trial_ = fractions_;
    step_before_trial_ = step;
  }
  fractions_ = std::move(proposed);
  return true;
}

}  // namespace tfmpi::planning
