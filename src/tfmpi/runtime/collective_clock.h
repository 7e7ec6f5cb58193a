// How long this process has spent inside collectives, counted once however
// many run at the same time.
//
// Note [Time in collectives]
// Work shares (python/tfmpi/transparent/shares.py, Note [Live shares]) need
// each rank's busy time: the wall time of its steps minus the time it waited
// for the others. A rank waits inside a collective, but not always the same
// one: a host held to a CPU quota is throttled wherever its quota runs out, so
// the fast ranks may wait in the gradient reduction, in a metric reduction or
// in the next step's first collective. So the TensorFlow kernels mark every
// collective from the moment TensorFlow hands it over (the rank is ready) to
// the moment it completes, and this clock adds up the union of those
// intervals. The transfer itself is in there too, alike for every rank.
#pragma once

namespace tfmpi {

void CollectiveStarted();
void CollectiveFinished();

// Seconds during which at least one collective was in progress, since the
// process started (a running interval included).
double CollectiveSeconds();

}  // namespace tfmpi
