// Pure: host pools from a hostfile or -H, and their validation.
//
// Note [Hostfile syntax]
// Open MPI: `host [slots=N] [max_slots=M]`; MPICH: `host:N`. `#` starts a
// comment, blank lines are skipped. A host without a slot count has
// `slots` unset: Open MPI then counts its cores, which only a probe knows, so
// it is left out of the "-np exceeds the slots" check unless probed. Hosts
// named twice are refused (Open MPI would add the slots silently; usually a
// copy-paste slip), as are slots < 1, max_slots < slots and unknown keys.
// (On -H, repeating a host is Open MPI's way to give it more slots.)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tfmpi/launcher/launch_error.h"

namespace tfmpi::launcher {

struct PoolHost {
  std::string name;
  std::optional<int> slots;  // unset: not given (Note [Hostfile syntax])
  int line = 0;              // where it was defined (0 for -H)
};

struct HostPool {
  std::vector<PoolHost> hosts;  // in file order
  // Sum of the given slots; nullopt when some host has none given.
  std::optional<int> TotalSlots() const;
};

// Parses hostfile `text`; `file` names it in messages ("hosts:3: ...").
// All problems are reported at once, one per line.
std::optional<HostPool> ParseHostfile(const std::string& text, const std::string& file,
                                      LaunchError* error);

// Parses -H "host1:2,host2,host3:4". As in Open MPI, a host without a count
// is one slot, and a host named again adds its slots ("a,a" is a:2).
std::optional<HostPool> ParseHostList(const std::string& list, LaunchError* error);

// The pool must have room for `num_proc` ranks, unless `oversubscribe`.
std::optional<LaunchError> CheckPoolSize(const HostPool& pool, int num_proc, bool oversubscribe,
                                         const std::string& what);

}  // namespace tfmpi::launcher
