// Link latency and bandwidth over MPI, from rank 0 to every other rank (one
// rank per host). Collective over MPI_COMM_WORLD; rank 0 gets the results.
//
// Note [Bounded link probe]
// Rank 0 drives every exchange: each message it sends is either a payload the
// peer echoes back or a "done" message (told apart by tag), so rank 0 alone
// decides how many round trips to make and can stop after a time budget per
// link (small messages: up to 100 round trips or 0.2 s; ~4 MiB ones: at least
// one, up to 8 or `seconds_per_link`). A slow link therefore costs at most a
// few large round trips; a dead one is the launcher's timeout's job.
#pragma once

#include <vector>

#include "tfmpi/probe/node_report.h"

namespace tfmpi::probe {

std::vector<LinkReport> ProbeLinks(double seconds_per_link);

}  // namespace tfmpi::probe
