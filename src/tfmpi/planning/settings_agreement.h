// Settings that every rank must share, checked once when the engine starts.
//
// Note [Settings every rank shares]
// Some settings shape which collectives run and how: the engine's fusion and
// message sizes and its response cache (ranks that fuse or cut differently
// call MPI with different counts: MPI_ERR_TRUNCATE, a hang or silently mixed
// data), and transparent mode's batch mode, shares, seed, sharded update and
// the like (ranks that split a batch differently train on wrong math without
// any error). tfmpirun gives every rank the same environment, but a per-host
// shell start-up file, a hand-written mpirun line or hosts with other
// versions installed do not. So when the engine starts, rank 0 gathers every
// rank's settings (EncodeSettings; the engine's list is SharedSettings in
// engine/shared_settings.h, transparent mode's config.shared_settings), and if
// any differ every rank fails to start: rank 0 with the list of what differs
// and where (SettingsDisagreement), the others pointing to it. Values are
// compared as in effect, so a setting left to its default and one set to it
// agree. Settings that only concern the rank that reads them (log level,
// timeline path, thread pools, timeouts) are not compared. Nothing before the
// check may depend on a compared setting in a way that changes the MPI calls
// a rank makes (the heartbeats' set-up runs on every rank for that reason).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tfmpi::planning {

// (name, value) in the caller's order; a name given twice keeps the first.
using Settings = std::vector<std::pair<std::string, std::string>>;

// One text per rank, for the gather, led by a format tag; DecodeSettings
// reverses it. Any bytes are allowed in names and values.
std::string EncodeSettings(const Settings& settings);
// False when `text` is not an EncodeSettings result of this format.
bool DecodeSettings(const std::string& text, Settings* out);

// "" when every rank's settings are the same. Otherwise the message rank 0
// reports: one line per setting that differs, with which ranks have which
// value ("(not set)" where a rank has none), and what to do. A text that does
// not decode is reported as such for its rank.
std::string SettingsDisagreement(const std::vector<std::string>& encoded_per_rank);

}  // namespace tfmpi::planning
