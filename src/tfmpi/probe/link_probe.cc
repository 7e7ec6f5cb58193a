#include "tfmpi/probe/link_probe.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <string>

namespace tfmpi::probe {

namespace {

constexpr int kTagPayload = 1;
constexpr int kTagDone = 2;
constexpr int kSmallBytes = 8;
constexpr int kLargeBytes = 4 << 20;

std::string Hostname() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

// Round trips of `bytes` to `peer` until `max_trips` or `budget` seconds;
// returns the mean round-trip time.
double RoundTrip(int peer, std::vector<char>& buffer, int bytes, int max_trips, double budget) {
  const double start = MPI_Wtime();
  int trips = 0;
  while (trips < max_trips && (trips == 0 || MPI_Wtime() - start < budget)) {
    MPI_Send(buffer.data(), bytes, MPI_BYTE, peer, kTagPayload, MPI_COMM_WORLD);
    MPI_Recv(buffer.data(), bytes, MPI_BYTE, peer, kTagPayload, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    ++trips;
  }
  return (MPI_Wtime() - start) / trips;
}

void Echo(std::vector<char>& buffer) {
  for (;;) {
    MPI_Status status;
    MPI_Probe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &status);
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    MPI_Recv(buffer.data(), bytes, MPI_BYTE, 0, status.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (status.MPI_TAG == kTagDone) return;
    MPI_Send(buffer.data(), bytes, MPI_BYTE, 0, kTagPayload, MPI_COMM_WORLD);
  }
}

}  // namespace

std::vector<LinkReport> ProbeLinks(double seconds_per_link) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<char> buffer(kLargeBytes, 1);
  // Host names go to rank 0 so that it can label the links.
  std::string name = Hostname();
  name.resize(255);
  std::vector<char> names(rank == 0 ? 256 * size : 0);
  MPI_Gather(name.c_str(), 256, MPI_CHAR, names.data(), 256, MPI_CHAR, 0, MPI_COMM_WORLD);

  std::vector<LinkReport> links;
  if (rank != 0) {
    Echo(buffer);
    return links;
  }
  for (int peer = 1; peer < size; ++peer) {
    RoundTrip(peer, buffer, kSmallBytes, 5, 0.05);  // warm up the connection
    const double small = RoundTrip(peer, buffer, kSmallBytes, 100, 0.2);
    const double large = RoundTrip(peer, buffer, kLargeBytes, 8, seconds_per_link);
    MPI_Send(buffer.data(), 0, MPI_BYTE, peer, kTagDone, MPI_COMM_WORLD);
    LinkReport link;
    link.from = names.data();
    link.to = &names[256 * peer];
    link.latency_us = small / 2 * 1e6;
    link.bandwidth_mbyte_s = 2.0 * kLargeBytes / std::max(large, 1e-9) / 1e6;
    links.push_back(link);
  }
  return links;
}

}  // namespace tfmpi::probe
