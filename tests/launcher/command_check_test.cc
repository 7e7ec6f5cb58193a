// CheckCommand / CheckLaunch over a fake file system: PATH lookup, Python
// detection, script existence, and refusal of -S/-I/-E.
#include "tfmpi/launcher/command_check.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace tfmpi::launcher {
namespace {

using Words = std::vector<std::string>;
using Kind = PythonInvocation::Kind;

// Executables: /usr/bin/python3, /usr/bin/python3.11, /bin/sh, /opt/run.sh.
// Other files: train.py, data/, /opt/notexec.sh, hosts.
FileSystem FakeFs() {
  static const std::set<std::string> kExecutable = {"/usr/bin/python3", "/usr/bin/python3.11", "/bin/sh",
                                                    "/opt/run.sh", "./local.sh"};
  static const std::set<std::string> kOther = {"train.py", "data", "/opt/notexec.sh", "hosts"};
  FileSystem fs;
  fs.is_executable = [](const std::string& p) { return kExecutable.count(p) != 0; };
  fs.exists = [](const std::string& p) { return kExecutable.count(p) != 0 || kOther.count(p) != 0; };
  return fs;
}

const std::string kPath = "/usr/local/bin:/usr/bin:/bin";

std::optional<LaunchError> Check(const Words& command) { return CheckCommand(command, kPath, FakeFs()); }

void ExpectError(const Words& command, int code, const std::string& text) {
  auto error = Check(command);
  ASSERT_TRUE(error.has_value()) << command.front();
  EXPECT_EQ(error->exit_code, code);
  EXPECT_NE(error->message.find(text), std::string::npos) << "expected '" << text << "' in: " << error->message;
}

TEST(FindExecutable, SearchesPathInOrder) {
  EXPECT_EQ(FindExecutable("python3", kPath, FakeFs()), "/usr/bin/python3");
  EXPECT_EQ(FindExecutable("sh", kPath, FakeFs()), "/bin/sh");
  EXPECT_FALSE(FindExecutable("nope", kPath, FakeFs()).has_value());
  EXPECT_FALSE(FindExecutable("", kPath, FakeFs()).has_value());
  EXPECT_EQ(FindExecutable("local.sh", "/usr/bin::/bin", FakeFs()), "./local.sh");  // empty entry is "."
}

TEST(FindExecutable, PathsAreNotSearched) {
  EXPECT_EQ(FindExecutable("/opt/run.sh", kPath, FakeFs()), "/opt/run.sh");
  EXPECT_FALSE(FindExecutable("/opt/notexec.sh", kPath, FakeFs()).has_value());
  EXPECT_FALSE(FindExecutable("bin/python3", kPath, FakeFs()).has_value());
}

TEST(IsPythonInterpreter, Names) {
  for (const char* yes : {"python", "python3", "python3.11", "/usr/bin/python3", "./venv/bin/python", "python2"}) {
    EXPECT_TRUE(IsPythonInterpreter(yes)) << yes;
  }
  for (const char* no : {"pythonw", "ipython", "python3-config", "python3.", "sh", "/opt/python/run.sh", ""}) {
    EXPECT_FALSE(IsPythonInterpreter(no)) << no;
  }
}

TEST(ParsePythonArgs, Targets) {
  struct Case {
    Words args;
    Kind kind;
    std::string target;
  };
  const Case cases[] = {
      {{"train.py", "--epochs", "3"}, Kind::kScript, "train.py"},
      {{"-u", "-W", "ignore", "-X", "dev", "train.py"}, Kind::kScript, "train.py"},
      {{"-Wignore", "-Xdev", "train.py", "-c", "x"}, Kind::kScript, "train.py"},
      {{"--check-hash-based-pycs", "never", "t.py"}, Kind::kScript, "t.py"},
      {{"-O", "--", "-odd.py"}, Kind::kScript, "-odd.py"},
      {{"-m", "pkg.train", "-E"}, Kind::kModule, "pkg.train"},
      {{"-mpkg"}, Kind::kModule, "pkg"},
      {{"-c", "import sys; sys.exit(3)", "-S"}, Kind::kCode, "import sys; sys.exit(3)"},
      {{"-uc", "pass"}, Kind::kCode, "pass"},
      {{"-ucpass"}, Kind::kCode, "pass"},
      {{"-"}, Kind::kStdin, ""},
      {{"-u"}, Kind::kNone, ""},
      {{}, Kind::kNone, ""},
  };
  for (const Case& c : cases) {
    const PythonInvocation inv = ParsePythonArgs(c.args);
    EXPECT_EQ(inv.kind, c.kind) << c.target;
    EXPECT_EQ(inv.target, c.target);
    EXPECT_EQ(inv.disabling_flags, "") << c.target;  // flags after the target belong to the program
  }
}

TEST(ParsePythonArgs, DisablingFlags) {
  EXPECT_EQ(ParsePythonArgs({"-S", "t.py"}).disabling_flags, "S");
  EXPECT_EQ(ParsePythonArgs({"-I", "-E", "t.py"}).disabling_flags, "IE");
  EXPECT_EQ(ParsePythonArgs({"-IE", "t.py"}).disabling_flags, "IE");
  EXPECT_EQ(ParsePythonArgs({"-sSE", "-c", "pass"}).disabling_flags, "SE");
  EXPECT_EQ(ParsePythonArgs({"-uEc", "pass"}).disabling_flags, "E");
  EXPECT_EQ(ParsePythonArgs({"-s", "-u", "-B", "t.py"}).disabling_flags, "");  // -s is harmless
  EXPECT_EQ(ParsePythonArgs({"-WE", "t.py"}).disabling_flags, "");  // -W's value, not -E
}

TEST(CheckCommand, AcceptsGoodCommands) {
  EXPECT_FALSE(Check({"python3", "train.py", "--epochs", "3"}));
  EXPECT_FALSE(Check({"python3", "-m", "not.checked"}));
  EXPECT_FALSE(Check({"python3.11", "-c", "pass"}));
  EXPECT_FALSE(Check({"/usr/bin/python3", "data"}));  // a folder with __main__.py
  EXPECT_FALSE(Check({"python3"}));
  EXPECT_FALSE(Check({"sh", "missing-script-is-sh's-business.sh"}));  // not Python: not our business
  EXPECT_FALSE(Check({"/opt/run.sh", "-E"}));                         // -E is not a python flag here
}

TEST(CheckCommand, CommandNotFound) {
  ExpectError({"nope", "x"}, kExitNotFound, "command not found: nope (not on PATH)");
  ExpectError({"python", "train.py"}, kExitNotFound, "command not found: python");  // only python3 is installed
  ExpectError({"/opt/missing.sh"}, kExitNotFound, "no such file");
  ExpectError({"/opt/notexec.sh"}, kExitNotFound, "not executable");
}

TEST(CheckCommand, ScriptNotFound) {
  ExpectError({"python3", "tain.py"}, kExitUsage, "script not found: tain.py");
  ExpectError({"python3", "-u", "missing.py", "train.py"}, kExitUsage, "script not found: missing.py");
}

TEST(CheckCommand, RefusesFlagsThatDisableTheHook) {
  ExpectError({"python3", "-S", "train.py"}, kExitUsage, "-S skips the site module");
  ExpectError({"python3", "-E", "-c", "pass"}, kExitUsage, "-E ignores PYTHONPATH");
  ExpectError({"python3", "-I", "-m", "pkg"}, kExitUsage, "-I (isolated mode)");
  ExpectError({"python3", "-IE", "train.py"}, kExitUsage, "transparent mode cannot be turned on");
  auto error = Check({"python3", "-sSE", "train.py"});
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->message.find("-S skips"), std::string::npos);
  EXPECT_NE(error->message.find("-E ignores"), std::string::npos);
}

TEST(CheckLaunch, Hostfile) {
  LaunchOptions o;
  o.num_proc = 2;
  o.command = {"python3", "train.py"};
  o.hostfile = "hosts";
  EXPECT_FALSE(CheckLaunch(o, kPath, FakeFs()));
  o.hostfile = "missing-hosts";
  auto error = CheckLaunch(o, kPath, FakeFs());
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->message.find("host file not found: missing-hosts"), std::string::npos);
}

}  // namespace
}  // namespace tfmpi::launcher

namespace tfmpi::launcher {
namespace {

// A name is run by its path on this host's PATH (mpirun would otherwise search
// a PATH with its own bin folder first); paths and unknown names stay as given.
TEST(ResolveCommand, NamesBecomeTheirPathHere) {
  EXPECT_EQ(ResolveCommand("python3", "/opt/venv/bin:/usr/bin", FakeFs()), "/usr/bin/python3");
  EXPECT_EQ(ResolveCommand("sh", kPath, FakeFs()), "/bin/sh");
  EXPECT_EQ(ResolveCommand("/opt/run.sh", kPath, FakeFs()), "/opt/run.sh");
  EXPECT_EQ(ResolveCommand("./local.sh", kPath, FakeFs()), "./local.sh");
  EXPECT_EQ(ResolveCommand("missing", kPath, FakeFs()), "missing");
}

}  // namespace
}  // namespace tfmpi::launcher
