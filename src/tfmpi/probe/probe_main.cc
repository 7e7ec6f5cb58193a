// tfmpi-probe: measures the host it runs on, or the links between hosts.
// tfmpirun starts it through mpirun (so it reaches hosts the way ranks do):
//   tfmpi-probe node [--seconds S]      one host: cores, quota, load, memory,
//                                       GPUs, compute benchmark (no MPI)
//   tfmpi-probe links [--seconds S]     one rank per host: ping-pong from rank 0
// Results are one line on stdout each (node_report.h prefixes), JSON.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tfmpi/probe/link_probe.h"
#include "tfmpi/probe/node_probe.h"

namespace {

int Usage() {
  std::fprintf(stderr, "usage: tfmpi-probe node|links [--seconds S]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  const std::string mode = argv[1];
  double seconds = mode == "node" ? 0.5 : 1.0;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else {
      return Usage();
    }
  }
  using namespace tfmpi::probe;
  if (mode == "node") {
    NodeReport report = ProbeNode();
    RunComputeBenchmark(seconds, &report);
    std::printf("%s%s\n", kNodeLinePrefix, ToJson(report).c_str());
    return 0;
  }
  if (mode != "links") return Usage();
  MPI_Init(&argc, &argv);
  const auto links = ProbeLinks(seconds);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) std::printf("%s%s\n", kLinksLinePrefix, ToJson(links).c_str());
  std::fflush(stdout);
  MPI_Finalize();
  return 0;
}
