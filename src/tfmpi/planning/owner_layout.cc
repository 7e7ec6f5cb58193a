#include "tfmpi/planning/owner_layout.h"

#include <algorithm>

#include "tfmpi/common/enforce.h"

namespace tfmpi::planning {

namespace {

std::size_t CeilDiv(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

}  // namespace

OwnerLayout::OwnerLayout(std::vector<std::size_t> segments, std::size_t max_round)
    : segments_(std::move(segments)) {
  TFMPI_ENFORCE(!segments_.empty(), "an owner layout needs at least one rank");
  for (std::size_t s : segments_) total_ += s;
  auto round_size = [&](std::size_t rounds) {
    std::size_t n = 0;
    for (std::size_t s : segments_) n += CeilDiv(s, rounds);
    return n;
  };
  if (max_round > 0 && total_ > max_round) {
    const std::size_t longest = *std::max_element(segments_.begin(), segments_.end());
    rounds_ = std::min(CeilDiv(total_, max_round), longest);
    // Rounding each piece up can overshoot by up to one element per rank;
    // past `longest` rounds every piece is one element and no round is smaller.
    while (round_size(rounds_) > max_round && rounds_ < longest) ++rounds_;
  }
  piece_.resize(segments_.size());
  for (std::size_t r = 0; r < segments_.size(); ++r) piece_[r] = CeilDiv(segments_[r], rounds_);
  counts_.assign(rounds_, std::vector<std::size_t>(segments_.size(), 0));
  round_offsets_.resize(rounds_);
  std::size_t offset = 0;
  for (std::size_t k = 0; k < rounds_; ++k) {
    round_offsets_[k] = offset;
    for (std::size_t r = 0; r < segments_.size(); ++r) {
      const std::size_t start = std::min(segments_[r], k * piece_[r]);
      counts_[k][r] = std::min(segments_[r], start + piece_[r]) - start;
      offset += counts_[k][r];
    }
  }
  TFMPI_ENFORCE_EQ(offset, total_);
}

std::size_t OwnerLayout::piece_start(int rank, std::size_t round) const {
  const auto r = static_cast<std::size_t>(rank);
  return std::min(segments_[r], round * piece_[r]);
}

std::size_t OwnerLayout::buffer_offset(int rank, std::size_t round) const {
  std::size_t offset = round_offsets_[round];
  for (int r = 0; r < rank; ++r) offset += counts_[round][static_cast<std::size_t>(r)];
  return offset;
}

void OwnerLayout::ForEachPiece(
    int rank, std::size_t begin, std::size_t count,
    const std::function<void(std::size_t, std::size_t, std::size_t)>& f) const {
  const auto r = static_cast<std::size_t>(rank);
  TFMPI_ENFORCE(begin + count <= segments_[r], "range past the end of rank {}'s segment", rank);
  std::size_t at = begin;
  const std::size_t end = begin + count;
  while (at < end) {
    const std::size_t k = at / piece_[r];
    const std::size_t in_piece = at - k * piece_[r];
    const std::size_t n = std::min(end - at, counts_[k][r] - in_piece);
    f(buffer_offset(rank, k) + in_piece, at, n);
    at += n;
  }
}

}  // namespace tfmpi::planning
