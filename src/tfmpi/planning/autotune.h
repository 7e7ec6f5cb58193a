// The search behind TFMPI_AUTOTUNE: which MPI message size and fusion
// thresholds the engine uses, chosen from measured windows of training.
// Pure: scores are passed in, so the search is testable without clocks or MPI.
//
// Note [Autotune]
// The engine times every busy cycle's execution (the collectives, the copies
// into and out of fusion buffers, the callbacks). A window is a run of busy
// cycles (Note [Autotune windows], engine/autotune_session.h); which cycles
// are busy, and the bytes they move, are the same on every rank (they run
// what negotiation decided), so every rank closes a window in the same cycle,
// and one tiny allreduce (MAX) gives every rank the same score: the slowest
// rank's execution seconds per byte. Every rank
// feeds that score to its own Tuner, which is deterministic, so all ranks
// switch to the same settings before the same cycle: the groups and MPI calls
// of a cycle keep matching across ranks. Results stay the same on every rank
// and equal up to rounding: fusion only packs tensors side by side, and a
// chunked allreduce sums the same elements as one call (Note [Message size]),
// though MPI may pick another algorithm, summing in another order, for
// another message size. TFMPI_AUTOTUNE must be the same on every rank
// (tfmpirun passes the environment to every rank): only ranks that search
// issue the window checks.
//
// The search is a coordinate search, one setting at a time, in the order
// message size, direct threshold, fusion threshold. For each setting, the
// current best point is measured again first (the machine's speed drifts, so
// candidates are compared with a baseline measured next to them), then every
// other candidate value; each point gets `samples` windows and its score is
// their median, except a candidate whose first window is `reject_factor`
// times slower than the baseline, which is dropped after it. A candidate
// replaces the baseline only if it is at least `min_gain` faster. Then, if the best point differs from the starting one,
// a confirmation phase alternates the two, `samples` windows each, and keeps
// the new point only if it is still `min_gain` faster there: autotune never
// settles on settings it measured slower than the defaults. A time bound
// (enforced by the engine through Finish()) ends the search with the start
// point unless a complete confirmation already kept another.
//
// A candidate that would run exactly the same MPI calls as the baseline in
// every cycle seen so far (SamePlan: the same fusion groups, and no collective
// longer than the smaller message size) is not measured: its windows could
// only measure noise, and noise of a few percent once passed the margin on
// this machine (docs/performance-history.md, "Autotune"). The cycles seen are
// the same on every rank, so every rank skips the same candidates.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "tfmpi/planning/fusion.h"

namespace tfmpi::planning {

struct TuningPoint {
  std::size_t message_elements = 0;  // largest count of one MPI call
  std::size_t direct_threshold = 0;  // bytes; tensors this big skip the fusion buffer
  std::size_t fusion_threshold = 0;  // bytes of one fusion buffer
  bool operator==(const TuningPoint& o) const {
    return message_elements == o.message_elements && direct_threshold == o.direct_threshold &&
           fusion_threshold == o.fusion_threshold;
  }
  bool operator!=(const TuningPoint& o) const { return !(*this == o); }
};

std::string Describe(const TuningPoint& p);  // "message 262144 elements, direct 1 MiB, fusion 64 MiB"

struct TunerOptions {
  TuningPoint start;  // the defaults (or what the user set)
  // Candidate values per setting; the start value is added if missing. Empty
  // (or only the start value): the setting is not tuned (the user fixed it).
  std::vector<std::size_t> message_elements;
  std::vector<std::size_t> direct_thresholds;
  std::vector<std::size_t> fusion_thresholds;
  int samples = 3;        // windows per point
  double min_gain = 0.03;  // a change must be this much faster (fraction of the score)
  // A candidate whose first window is this many times slower than its
  // baseline's median gets no more windows (bad candidates cost the job time).
  double reject_factor = 1.25;
  // Whether two points run the same calls (nullptr: never assumed).
  std::function<bool(const TuningPoint&, const TuningPoint&)> same_plan;
};

// Whether `a` and `b` plan the same collectives for every cycle of
// `cycles` (each the items of one busy cycle; error items never run a call).
bool SamePlan(const std::vector<std::vector<FusionItem>>& cycles, const TuningPoint& a,
              const TuningPoint& b);

// The default candidates around `start`.
TunerOptions DefaultTunerOptions(const TuningPoint& start, bool tune_message, bool tune_direct,
                                 bool tune_fusion);

class Tuner {
 public:
  explicit Tuner(TunerOptions options);

  // The settings for the next window.
  const TuningPoint& current() const { return current_; }
  const TuningPoint& start() const { return options_.start; }
  bool done() const { return done_; }
  // The point kept so far (after done(): the one to run with).
  const TuningPoint& best() const { return best_; }  // before done(): the best so far
  const std::string& phase() const { return phase_; }  // "message size", ..., "confirm", "done"
  int skipped() const { return skipped_; }  // candidates not measured (same plan)

  // Records the score of one window run with current(): lower is better
  // (seconds per byte). Returns true when current() changed.
  bool Record(double score);
  // Stops the search (time bound): current() becomes the start point unless
  // a complete confirmation kept another.
  void Finish();

 private:
  struct Dimension {
    std::string name;
    std::vector<std::size_t> values;
    std::size_t TuningPoint::*field;
  };
  void StartDimension();
  void EndDimension();
  void StartConfirm();
  void NextCandidate();  // sets current_ to the next candidate worth measuring, or ends the dimension
  bool Same(const TuningPoint& a, const TuningPoint& b) const {
    return options_.same_plan && options_.same_plan(a, b);
  }

  TunerOptions options_;
  std::vector<Dimension> dims_;
  std::size_t dim_ = 0;
  // The current dimension: the values to measure (baseline first) and the
  // median score of each once measured.
  std::vector<std::size_t> queue_;
  std::size_t next_value_ = 0;
  std::vector<double> window_scores_;  // of the point being measured
  double baseline_score_ = 0;
  std::size_t best_value_ = 0;
  double best_score_ = 0;
  // Confirmation: alternating start and best.
  std::vector<double> confirm_start_, confirm_best_;
  TuningPoint best_, current_;
  std::string phase_;
  bool done_ = false;
  int skipped_ = 0;
};

double Median(std::vector<double> v);

}  // namespace tfmpi::planning
