// Where the tensors of a fused group with several roots (owners) lie in the
// fusion buffer, so that one reduce-scatter or allgather per round moves them.
//
// Note [Owner layout]
// A fused reduce (each tensor reduced to its owner) or a broadcast group of
// several roots is one collective over "segments": rank r's segment is the
// concatenation of the tensors it owns, in group order. MPI's reduce-scatter
// and allgatherv take the segments one after another in rank order, and one
// call is fastest below a message size (Note [Message size]); above it, the
// group runs in rounds, and round k holds piece k of every segment (about
// 1/rounds of each), so that every round still spreads the work over all
// ranks. The buffer holds round 0 (rank 0's piece, rank 1's piece, ...), then
// round 1, and so on; a tensor may span pieces of several rounds. Every rank
// computes the same layout from the same group.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace tfmpi::planning {

class OwnerLayout {
 public:
  // `segments[r]`: rank r's elements; each round moves at most
  // `max_round` elements in all (0: no limit), unless that is fewer than the
  // ranks with elements: then each round takes one element of every segment.
  OwnerLayout(std::vector<std::size_t> segments, std::size_t max_round);

  std::size_t rounds() const { return rounds_; }
  std::size_t total() const { return total_; }
  // Round k's pieces, per rank (elements), and where the round starts.
  const std::vector<std::size_t>& counts(std::size_t round) const { return counts_[round]; }
  std::size_t round_offset(std::size_t round) const { return round_offsets_[round]; }
  // Where rank r's piece of round k starts in rank r's segment.
  std::size_t piece_start(int rank, std::size_t round) const;
  // Where rank r's piece of round k lies in the buffer.
  std::size_t buffer_offset(int rank, std::size_t round) const;

  // Calls f(buffer_offset, segment_offset, count) for the contiguous pieces
  // of elements [begin, begin + count) of rank r's segment, in order.
  void ForEachPiece(int rank, std::size_t begin, std::size_t count,
                    const std::function<void(std::size_t, std::size_t, std::size_t)>& f) const;

 private:
  std::vector<std::size_t> segments_;
  std::vector<std::size_t> piece_;  // per rank: elements per round (the last may be shorter)
  std::size_t rounds_ = 1;
  std::size_t total_ = 0;
  std::vector<std::vector<std::size_t>> counts_;
  std::vector<std::size_t> round_offsets_;
};

}  // namespace tfmpi::planning
