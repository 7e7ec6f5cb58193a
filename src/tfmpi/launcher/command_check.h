// Checks of COMMAND (and the host file) before anything is launched. Pure: the
// file system is reached only through the FileSystem passed in, so tests fake it.
//
// Note [Python flags that disable the start-up hook]
// tfmpirun turns transparent mode on by putting tfmpi's sitecustomize first
// on PYTHONPATH. `python -S` never imports the site module (so no
// sitecustomize), `-E` ignores PYTHONPATH and `-I` implies -E. With any of
// them every rank would silently train alone on the full data set, so the
// launch is refused instead.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfmpi/launcher/launch_error.h"
#include "tfmpi/launcher/launch_options.h"

namespace tfmpi::launcher {

struct FileSystem {
  std::function<bool(const std::string&)> exists;         // any kind of file
  std::function<bool(const std::string&)> is_executable;  // a regular file we may execute
};

// The real file system (stat/access).
FileSystem RealFileSystem();

// `name` when it contains '/' and is executable; otherwise the first
// executable PATH entry/name (an empty entry means "."). nullopt if none.
std::optional<std::string> FindExecutable(const std::string& name, const std::string& path_env,
                                          const FileSystem& fs);

// True for python, python3, python3.11, ... (any directory, basename only).
bool IsPythonInterpreter(std::string_view command);

// What a python command line runs.
struct PythonInvocation {
  enum class Kind { kScript, kModule, kCode, kStdin, kNone } kind = Kind::kNone;
  std::string target;             // the script path, module name or code
  std::string disabling_flags;    // which of S, I, E appear, in order, e.g. "IE"
};

// Pure: interprets Python's own options in `args` (the words after the interpreter).
PythonInvocation ParsePythonArgs(const std::vector<std::string>& args);

// COMMAND must be executable; a Python COMMAND must name an existing script
// (or use -m / -c) and must not disable the start-up hook.
std::optional<LaunchError> CheckCommand(const std::vector<std::string>& command,
                                        const std::string& path_env, const FileSystem& fs);

// Where `program` is run from: a bare name becomes its absolute path on
// path_env (unchanged when not found; CheckCommand reports that).
std::string ResolveCommand(const std::string& program, const std::string& path_env,
                           const FileSystem& fs);

// The command plus --hostfile, which must exist.
std::optional<LaunchError> CheckLaunch(const LaunchOptions& options, const std::string& path_env,
                                       const FileSystem& fs);

}  // namespace tfmpi::launcher
