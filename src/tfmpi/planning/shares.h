// Pure work-share planning: how many samples of each global batch every rank
// computes, from how fast the ranks are.
//
// Note [Work shares]
// Under global-batch semantics rank i computes s_i of the B samples of a batch,
// sum_i s_i = B, and the optimizer weights its gradient s_i / B, so every
// update is the 1-process update whatever the split (Note [Global batch],
// python/tfmpi/transparent/batching.py). The split only decides how long a
// step takes: about max_i s_i * t_i, t_i the seconds rank i needs per sample.
// That is smallest when s_i is proportional to the rank's speed 1 / t_i.
// * Shares are kept as fractions f_i (sum 1), because batches vary in size
//   (the ragged last batch): a batch of b samples is cut at
//   floor(b * c_i + 0.5), c_i = f_0 + ... + f_{i-1} the cuts (c_0 = 0,
//   c_N = 1 exactly), so the slices partition it in rank order for every b,
//   and slice sizes differ from b * f_i by less than 1. Transparent mode keeps
//   the cuts in a variable and evaluates the same formula inside the compiled
//   step (python/tfmpi/transparent/shares.py): new shares are a new value of
//   the variable, never a new trace.
// * Every slice has a row when the batch has N rows or more: each bound is
//   moved to at least one past the one before (b_i = max(b_i, b_{i-1} + 1),
//   left to right) and at most where the ranks after it still get a row each
//   (b_i = min(b_i, b - (N - i))). Where every slice already has a row nothing
//   moves. An empty slice is not only wasted: TensorFlow 2.21's conv2d returns
//   a tensor of its input's shape for an empty batch (the gradient then fails
//   on that rank), and a mean over no rows is NaN.
// * A rank of speed 0 (or too slow to matter) gets fraction 0: one row of
//   each batch (above), none of a batch smaller than N; it still takes part
//   in every collective. Where every speed is 0
//   or unknown, the shares are equal.
// * Rebalancer turns measured compute times into new fractions: it smooths the
//   per-sample times (exponentially, `smoothing` the weight of the newest
//   measurement) and proposes a change only when the predicted step time
//   improves by more than `min_gain` (hysteresis), so measurement noise does
//   not move work back and forth.
// * A change needs two windows that agree (Note [Confirmed changes]), and is a
//   trial until it is measured (Note [Changes on trial]).
//
// Note [Changes on trial]
// The model above makes a rank's time proportional to its samples. Work
// that does not grow with the slice (Python, dispatch, a small model's fixed
// cost per step) breaks it: a rank with few samples then looks slow per
// sample, is given fewer, looks slower still, and its share runs away to
// nothing while the step gets no faster. So each change is kept only if the
// step measured with it (the slowest rank's seconds per step, the rank every
// other rank waits for) is at least min_gain / 2 faster than the step measured
// before it; otherwise the previous fractions come back and no change is
// tried for `hold` measurements, doubling after every change that did not
// pay (up to 16 x hold) and back to `hold` after one that did. A step
// measured more than 2 x min_gain slower than the one it is compared with
// means something changed: a host became busy, or the change was wrong. A
// change on trial is then kept unless that window's own seconds per sample
// predict a faster step with the fractions before it (a host that became
// busy: kept, and the shares may follow it further once a second window
// confirms); else it is undone as above, and the hold that follows is
// measured against the step that window predicts for the fractions restored
// (the step before the trial came from the windows that proposed it, which
// may have been transients). A hold ends at a step that much slower than
// when it began, so the shares may follow.
// A change is judged only once the measured samples follow it (an input
// pipeline that cuts batches with the shares of its pass follows from its
// next pass).
//
// Note [Confirmed changes]
// A window's busy time is not always work. In an input-bound job a rank's
// busy time is mostly waiting for its own prefetch buffer, which depends on
// how full the buffer was when the window began: after the first trace, at a
// pass start (a new pipeline), with the threads of two ranks contending for
// the same cores. One such window measured 0.84 s against 0.13 s for the
// same 384 samples on two identical ranks; acting on it moved the split of
// 256 to 35:221 and the step got slower (docs/performance-history.md,
// "Input-bound training"). So a change is proposed only when the smoothed
// estimate, this window alone and the window before it alone each predict it
// faster (the smoothed one by min_gain, each window by min_gain / 2): a
// transient of one window moves nothing. The price is a second window: a host
// that becomes busy is followed after the second window that sees it, not the
// first, and the first measurement of a run changes nothing on its own. So
// that second window is short: after a window that proposed a change alone
// (awaiting_confirmation), transparent mode measures again after 4 steps, not
// TFMPI_REBALANCE_STEPS (python/tfmpi/transparent/shares.py).
#pragma once

#include <cstdint>
#include <vector>

namespace tfmpi::planning {

// Fractions proportional to `speeds` (samples per second; negative or
// non-finite count as 0), summing to 1; equal when no speed is positive.
std::vector<double> ShareFractions(const std::vector<double>& speeds);

// The cuts c_0 = 0 <= c_1 <= ... <= c_N = 1 of `fractions` (negative ones count as 0).
std::vector<double> Cuts(const std::vector<double>& fractions);

// Slice bounds of a batch of `batch` samples: rank i takes
// [bounds[i], bounds[i + 1]); bounds[0] = 0, bounds.back() = batch, non-decreasing.
std::vector<std::int64_t> SliceBounds(const std::vector<double>& fractions, std::int64_t batch);

// Slice sizes (bounds differences) of a batch of `batch` samples.
std::vector<std::int64_t> SliceSizes(const std::vector<double>& fractions, std::int64_t batch);

// max_i size_i * seconds_per_sample_i for a batch of `batch` samples.
double PredictedStepSeconds(const std::vector<double>& fractions, std::int64_t batch,
                            const std::vector<double>& seconds_per_sample);

struct RebalanceOptions {
  double smoothing = 0.5;  // weight of the newest measurement in the running estimate
  double min_gain = 0.05;  // change shares only if the step gets this much faster (relative)
  int hold = 5;            // measurements without a change after one that did not pay
};

class Rebalancer {
 public:
  Rebalancer(std::vector<double> fractions, RebalanceOptions options);

  // Rank i computed `samples[i]` samples in `seconds[i]` seconds since the last
  // call (a rank with 0 samples gives no measurement). Returns true, with new
  // `fractions()`, when the shares should change for a batch of `batch`: a
  // change proposed, or the last change undone (Note [Changes on trial]).
  bool Observe(const std::vector<double>& seconds, const std::vector<std::int64_t>& samples,
               std::int64_t batch);

  const std::vector<double>& fractions() const { return fractions_; }
  // True after an Observe whose window alone proposed a change that the
  // window before it did not confirm (Note [Confirmed changes]): the next
  // window may be short.
  bool awaiting_confirmation() const { return awaiting_confirmation_; }
  // Smoothed seconds per sample of each rank (0: not measured yet).
  const std::vector<double>& seconds_per_sample() const { return per_sample_; }

 private:
  // True when the measured samples are split closer to fractions_ than to
  // the fractions before the change on trial.
  bool FollowsTrial(const std::vector<std::int64_t>& samples) const;
  // Each rank's seconds per sample in one window (0: no measurement).
  static std::vector<double> Window(const std::vector<double>& seconds,
                                    const std::vector<std::int64_t>& samples);
  // Whether `proposed` gives a step more than `gain` (relative) faster than
  // `current` for a batch of `batch`, by `per_sample` (0: unmeasured, taken as
  // the slowest measured rank); false when no rank is measured.
  static bool Favours(const std::vector<double>& proposed, const std::vector<double>& current,
                      const std::vector<double>& per_sample, std::int64_t batch, double gain);
  // `per_sample` with each unmeasured rank (0) taken as the slowest measured
  // one, so it is given work to be measured on; empty when none is measured.
  static std::vector<double> Estimate(const std::vector<double>& per_sample);

  std::vector<double> fractions_;
  std::vector<double> per_sample_;
  RebalanceOptions options_;
  std::vector<double> last_window_;   // the previous window's seconds per sample
  bool awaiting_confirmation_ = false;
  std::vector<double> before_trial_;  // fractions before the change on trial; empty: none
  double step_before_trial_ = 0;      // seconds per step measured before it
  int hold_left_ = 0;                 // measurements left without a change
  double step_at_hold_ = 0;           // seconds per step when the hold began
  int hold_next_ = 0;                 // the hold after the next change that does not pay
};

}  // namespace tfmpi::planning
