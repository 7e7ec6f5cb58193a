/* Run on every rank by test_harness.py: says where the rank runs and what it sees.
 * One line per rank: rank, size, an allreduce over all ranks, the rank's network
 * namespace (inode), host name, IPv4 addresses, cgroups, and two marker variables. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void ipv4_addresses(char* out, size_t size) {
  struct ifaddrs* list = NULL;
  out[0] = '\0';
  if (getifaddrs(&list) != 0) return;
  for (struct ifaddrs* a = list; a != NULL; a = a->ifa_next) {
    if (a->ifa_addr == NULL || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &((struct sockaddr_in*)a->ifa_addr)->sin_addr, text, sizeof text);
    if (out[0] != '\0') strncat(out, ",", size - strlen(out) - 1);
    strncat(out, text, size - strlen(out) - 1);
  }
  freeifaddrs(list);
}

static void cgroups(char* out, size_t size) {
  out[0] = '\0';
  FILE* f = fopen("/proc/self/cgroup", "r");
  if (f == NULL) return;
  char line[512];
  while (fgets(line, sizeof line, f) != NULL) {
    line[strcspn(line, "\n")] = ';';
    strncat(out, line, size - strlen(out) - 1);
  }
  fclose(f);
}

static const char* or_unset(const char* value) { return value != NULL ? value : "<unset>"; }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, one = 1, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  struct stat ns;
  if (stat("/proc/self/ns/net", &ns) != 0) ns.st_ino = 0;
  char host[256] = "", addrs[1024], groups[4096];
  gethostname(host, sizeof host - 1);
  ipv4_addresses(addrs, sizeof addrs);
  cgroups(groups, sizeof groups);
  printf("REPORT rank=%d size=%d sum=%d netns=%lu host=%s addrs=%s marker=%s "
         "forwarded=%s cgroups=%s\n",
         rank, size, sum, (unsigned long)ns.st_ino, host, addrs,
         or_unset(getenv("TFMPI_TEST_MARKER")), or_unset(getenv("CLUSTER_TEST_FORWARDED")),
         groups);
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
