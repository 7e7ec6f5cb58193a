#include "tfmpi/launcher/environment.h"

#include <array>
#include <cctype>
#include <string_view>

namespace tfmpi::launcher {

namespace {

constexpr std::array<std::string_view, 27> kHostSpecific = {
    "HOSTNAME", "HOST", "PWD", "OLDPWD", "SHLVL", "_", "PS1", "PROMPT_COMMAND", "DISPLAY",
    "XAUTHORITY", "TERM", "TERMCAP", "COLUMNS", "LINES", "TMUX", "TMUX_PANE", "STY", "WINDOW",
    "MAIL", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "TMPDIR",
    "MPIEXEC_TIMEOUT"};

// Session and host (SSH_, XDG_SESSION_, BASH_FUNC_), MPI launchers' (every
// rank gets its own from its launcher), and batch schedulers' (per node or
// task). MPICH's and Intel MPI's tuning variables (MPIR_CVAR_*, I_MPI_*) are
// the user's settings for every rank, and are forwarded.
constexpr std::array<std::string_view, 17> kHostSpecificPrefixes = {
    "SSH_", "XDG_SESSION_", "BASH_FUNC_", "OMPI_", "PMIX_", "PMI_", "PRTE_", "OPAL_", "ORTE_",
    "HYDRA_", "SLURM_", "PBS_", "LSB_", "LSF_", "SGE_", "COBALT_", "FLUX_"};

bool Exportable(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace

bool IsHostSpecific(const std::string& name) {
  for (std::string_view exact : kHostSpecific) {
    if (name == exact) return true;
  }
  for (std::string_view prefix : kHostSpecificPrefixes) {
    if (name.compare(0, prefix.size(), prefix) == 0) return true;
  }
  return false;
}

std::set<std::string> ForwardedVariables(const Environment& env) {
  std::set<std::string> out;
  for (const auto& [name, value] : env) {
    if (Exportable(name) && !IsHostSpecific(name)) out.insert(name);
  }
  return out;
}

}  // namespace tfmpi::launcher
