#include "tfmpi/launcher/command_check.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

namespace tfmpi::launcher {

FileSystem RealFileSystem() {
  FileSystem fs;
  fs.exists = [](const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
  };
  fs.is_executable = [](const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
  };
  return fs;
}

std::optional<std::string> FindExecutable(const std::string& name, const std::string& path_env,
                                          const FileSystem& fs) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    return fs.is_executable(name) ? std::optional<std::string>(name) : std::nullopt;
  }
  std::size_t start = 0;
  while (start <= path_env.size()) {
    std::size_t end = path_env.find(':', start);
    if (end == std::string::npos) end = path_env.size();
    std::string dir = path_env.substr(start, end - start);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    if (fs.is_executable(candidate)) return candidate;
    start = end + 1;
  }
  return std::nullopt;
}

bool IsPythonInterpreter(std::string_view command) {
  const std::size_t slash = command.rfind('/');
  const std::string base(slash == std::string_view::npos ? command : command.substr(slash + 1));
  static const std::regex kPython(R"(python(\d+(\.\d+)?)?)");
  return std::regex_match(base, kPython);
}

PythonInvocation ParsePythonArgs(const std::vector<std::string>& args) {
  using Kind = PythonInvocation::Kind;
  PythonInvocation inv;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "-") {
      inv.kind = Kind::kStdin;
      return inv;
    }
    if (word == "--") {  // the next word is the script
      if (i + 1 < args.size()) {
        inv.kind = Kind::kScript;
        inv.target = args[i + 1];
      }
      return inv;
    }
    if (word.size() < 2 || word[0] != '-') {
      inv.kind = Kind::kScript;
      inv.target = word;
      return inv;
    }
    if (word[1] == '-') {  // --version, --help, --check-hash-based-pycs MODE, ...
      if (word == "--check-hash-based-pycs") ++i;
      continue;
    }
    // Short options, possibly combined (-IE, -uc CODE, -Wignore, -mpkg).
    for (std::size_t j = 1; j < word.size(); ++j) {
      const char c = word[j];
      if (c == 'S' || c == 'I' || c == 'E') {
        if (inv.disabling_flags.find(c) == std::string::npos) inv.disabling_flags += c;
        continue;
      }
      if (c != 'c' && c != 'm' && c != 'W' && c != 'X') continue;  // a plain flag
      std::string value = word.substr(j + 1);
      if (value.empty() && i + 1 < args.size()) value = args[++i];
      if (c == 'c' || c == 'm') {
        inv.kind = c == 'c' ? Kind::kCode : Kind::kModule;
        inv.target = value;
        return inv;
      }
      break;  // -W / -X consumed their value
    }
  }
  return inv;
}

namespace {

std::string DisablingReason(char flag) {
  switch (flag) {
    case 'S':
      return "-S skips the site module, which is what loads the start-up hook";
    case 'I':
      return "-I (isolated mode) ignores PYTHONPATH, where tfmpirun puts the start-up hook";
    default:
      return "-E ignores PYTHONPATH, where tfmpirun puts the start-up hook";
  }
}

}  // namespace

std::string ResolveCommand(const std::string& program, const std::string& path_env,
                           const FileSystem& fs) {
  if (program.find('/') != std::string::npos) return program;
  const std::optional<std::string> found = FindExecutable(program, path_env, fs);
  if (!found) return program;
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(*found, ec);
  return ec ? *found : absolute.lexically_normal().string();
}

std::optional<LaunchError> CheckCommand(const std::vector<std::string>& command,
                                        const std::string& path_env, const FileSystem& fs) {
  if (command.empty()) return LaunchError{kExitUsage, "no COMMAND given"};
  const std::string& program = command.front();
  if (!FindExecutable(program, path_env, fs)) {
    const bool is_path = program.find('/') != std::string::npos;
    return LaunchError{kExitNotFound,
                       is_path && fs.exists(program)
                           ? fmt::format("command not executable: {} (check its permissions, or "
                                         "run it through its interpreter)", program)
                           : fmt::format("command not found: {} ({})", program,
                                         is_path ? "no such file" : "not on PATH")};
  }
  if (!IsPythonInterpreter(program)) return std::nullopt;

  const PythonInvocation inv = ParsePythonArgs({command.begin() + 1, command.end()});
  if (!inv.disabling_flags.empty()) {
    std::string reasons;
    for (char flag : inv.disabling_flags) reasons += "\n  " + DisablingReason(flag);
    return LaunchError{kExitUsage,
                       fmt::format("refusing to run '{} -{}': transparent mode cannot be turned on "
                                   "with these flags:{}\nWithout it every rank would train alone on "
                                   "the whole data set. Remove the flag(s) from the command.",
                                   program, inv.disabling_flags, reasons)};
  }
  if (inv.kind == PythonInvocation::Kind::kScript && !fs.exists(inv.target)) {
    return LaunchError{kExitUsage, fmt::format("script not found: {}", inv.target)};
  }
  return std::nullopt;
}

std::optional<LaunchError> CheckLaunch(const LaunchOptions& options, const std::string& path_env,
                                       const FileSystem& fs) {
  if (!options.hostfile.empty() && !fs.exists(options.hostfile)) {
    return LaunchError{kExitUsage, fmt::format("host file not found: {}", options.hostfile)};
  }
  return CheckCommand(options.command, path_env, fs);
}

}  // namespace tfmpi::launcher
