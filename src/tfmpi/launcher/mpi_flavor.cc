#include "tfmpi/launcher/mpi_flavor.h"

#include <cstdio>

#include "tfmpi/launcher/shell_words.h"

namespace tfmpi::launcher {

namespace {

bool Contains(std::string_view text, std::string_view word) {
  return text.find(word) != std::string_view::npos;
}

}  // namespace

const char* MpiFlavorName(MpiFlavor flavor) {
  switch (flavor) {
    case MpiFlavor::kOpenMpi:
      return "Open MPI";
    case MpiFlavor::kMpich:
      return "MPICH";
  }
  return "unknown";
}

std::optional<MpiFlavor> ParseMpiFlavor(std::string_view name) {
  if (name == "openmpi") return MpiFlavor::kOpenMpi;
  if (name == "mpich") return MpiFlavor::kMpich;
  return std::nullopt;
}

std::optional<MpiFlavor> DetectFlavor(std::string_view version_text) {
  if (Contains(version_text, "Open MPI") || Contains(version_text, "OpenRTE")) {
    return MpiFlavor::kOpenMpi;
  }
  if (Contains(version_text, "HYDRA") || Contains(version_text, "MPICH") ||
      Contains(version_text, "Intel(R) MPI")) {
    return MpiFlavor::kMpich;
  }
  return std::nullopt;
}

std::string ReadMpirunVersion(const std::string& mpirun) {
  const std::string command = ShellQuote(mpirun) + " --version 2>&1 </dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {};
  std::string text;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) text.append(buffer, n);
  ::pclose(pipe);
  return text;
}

}  // namespace tfmpi::launcher
