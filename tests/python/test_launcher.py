"""End to end: the installed `tfmpirun` (the console script, the C++ launcher
and mpirun). Runs in one process; every launch has a timeout."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

EVERY_OPTION = ["-np", "--num-proc", "-H", "--hosts", "--hostfile", "--verbose", "--output-filename",
                "--tag-output", "--all-ranks-output", "--batch-mode", "--sync-batchnorm", "--seed",
                "--mpirun", "--mpi-flavor", "--mpi-args", "--dry-run", "--help", "--version",
                "--placement", "--probe-json", "--probe-timeout"]
EVERY_VARIABLE = ["TFMPI_TRANSPARENT", "PYTHONPATH", "TFMPI_SEED", "TFMPI_BATCH_MODE",
                  "TFMPI_SYNC_BATCHNORM", "TFMPI_ALL_RANKS_OUTPUT", "TFMPI_PROBE_SPEEDS",
                  "TFMPI_THREADS", "TFMPI_BIND_CORES"]
PYTHON = sys.executable


def tfmpirun(*args, timeout=30, cwd=None, env=None):
    exe = shutil.which("tfmpirun")
    assert exe, "tfmpirun is not on PATH: install tfmpi (pip install --no-build-isolation .)"
    full_env = dict(os.environ)
    full_env.update(env or {})
    try:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout,
                              cwd=cwd, env=full_env)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"tfmpirun {args} timed out after {timeout} s (a hang)") from e


def test_help_mentions_every_option_and_variable():
    r = tfmpirun("--help")
    assert r.returncode == 0, r.stderr
    for word in EVERY_OPTION + EVERY_VARIABLE + ["COMMAND"]:
        assert word in r.stdout, word
    assert "--tfmpi-site-dir" not in r.stdout  # set by the shim, hidden


def test_version():
    r = tfmpirun("--version")
    assert r.returncode == 0
    assert r.stdout.startswith("tfmpirun (tfmpi) ")


def test_dry_run_prints_the_command_and_launches_nothing(tmp_path):
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').close()"
    r = tfmpirun("-np", "2", "--dry-run", "--seed", "7", PYTHON, "-c", code, "--epochs", "3", "-np", "5")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout
    line = lines[0]
    assert line.startswith("TFMPI_TRANSPARENT=1 PYTHONPATH="), line
    assert os.path.join("tfmpi", "_site") in line
    assert "TFMPI_SEED=7 " in line
    assert " -np 2 " in line
    assert line.endswith(" --epochs 3 -np 5"), line  # COMMAND's arguments untouched
    assert not marker.exists()


def test_a_command_name_runs_by_its_path_here(tmp_path):
    # Open MPI puts its own bin folder first on the ranks' PATH: a bare `python3`
    # there could be the system interpreter instead of the user's (virtualenv,
    # pyenv). The name is resolved on this PATH, and the ranks run that file.
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python3").symlink_to(PYTHON)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    r = tfmpirun("-np", "2", "--dry-run", "python3", "-c", "pass", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip().endswith(f" {bin_dir / 'python3'} -c pass"), r.stdout
    r = tfmpirun("-np", "2", "python3", "-c", "import sys; print('EXE', sys.executable)", env=env,
                 timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"EXE {bin_dir / 'python3'}" in r.stdout, r.stdout


@pytest.mark.parametrize("flavor, expected", [
    ("openmpi", ["--bind-to none --map-by slot", "-x TFMPI_TRANSPARENT", "-x TFMPI_FUSION_THRESHOLD",
                 "-x PYTHONPATH", "-H a:2,b:2", "--tag-output"]),
    ("mpich", ["-genv TFMPI_TRANSPARENT 1", "-genv TFMPI_FUSION_THRESHOLD 4096", "-hosts a:2,b:2",
               "-prepend-rank"]),
])
def test_dry_run_per_flavor(flavor, expected):
    r = tfmpirun("-np", "4", "-H", "a:2,b:2", "--tag-output", "--mpi-flavor", flavor, "--dry-run",
                 "--", PYTHON, "-c", "pass", env={"TFMPI_FUSION_THRESHOLD": "4096"})
    assert r.returncode == 0, r.stderr
    for words in expected:
        assert words in r.stdout, (words, r.stdout)


@pytest.mark.parametrize("flavor", ["openmpi", "mpich"])
def test_the_environment_reaches_remote_ranks_but_not_host_specific_variables(flavor):
    r = tfmpirun("-np", "4", "-H", "a:2,b:2", "--mpi-flavor", flavor, "--dry-run", "--", PYTHON,
                 "-c", "pass",
                 env={"TF_USE_LEGACY_KERAS": "1", "MY_DATA_DIR": "/data", "HOSTNAME": "node7",
                      "OMPI_COMM_WORLD_RANK": "3", "CUDA_VISIBLE_DEVICES": "1"})
    assert r.returncode == 0, r.stderr
    words = r.stdout.split()
    after = [n for w, n in zip(words, words[1:]) if w == {"openmpi": "-x", "mpich": "-genvlist"}[flavor]]
    # Open MPI: -x A -x B ...; MPICH: -genvlist A,B,... (Hydra would pass every variable)
    forwarded = set(",".join(after).split(","))
    assert {"TF_USE_LEGACY_KERAS", "MY_DATA_DIR", "PATH"} <= forwarded, r.stdout
    assert not {"HOSTNAME", "OMPI_COMM_WORLD_RANK", "CUDA_VISIBLE_DEVICES"} & forwarded, r.stdout


def test_verbose_shows_flavor_and_random_seed():
    r = tfmpirun("-np", "1", "--verbose", "--dry-run", PYTHON, "-c", "pass")
    assert r.returncode == 0, r.stderr
    assert "tfmpirun: MPI: " in r.stderr
    assert "picked for this launch" in r.stderr


def test_script_not_found(tmp_path):
    r = tfmpirun("-np", "2", PYTHON, "train.py", cwd=tmp_path)
    assert r.returncode != 0
    assert "tfmpirun: script not found: train.py" in r.stderr


def test_python_flags_that_disable_the_hook_are_refused():
    r = tfmpirun("-np", "2", PYTHON, "-IE", "-c", "pass")
    assert r.returncode != 0
    assert "transparent mode cannot be turned on" in r.stderr
    assert "-E ignores PYTHONPATH" in r.stderr


def test_command_not_found():
    r = tfmpirun("-np", "2", "no-such-command-tfmpi", "x")
    assert r.returncode == 127
    assert "command not found: no-such-command-tfmpi" in r.stderr


def test_mpirun_not_found():
    r = tfmpirun("--mpirun", "/nonexistent", "-np", "2", PYTHON, "-c", "pass")
    assert r.returncode == 127
    assert "mpirun not found" in r.stderr
    assert "--mpirun" in r.stderr


def test_usage_errors(tmp_path):
    r = tfmpirun(PYTHON, "-c", "pass")
    assert r.returncode == 2 and "-np N is required" in r.stderr
    r = tfmpirun("-np", "2")
    assert r.returncode == 2 and "no COMMAND" in r.stderr
    r = tfmpirun("-np", "2", "--hostfile", str(tmp_path / "hosts"), PYTHON, "-c", "pass")
    assert r.returncode == 2 and "host file not found" in r.stderr


def test_real_run_turns_transparent_mode_on():
    # The start-up hook pops TFMPI_TRANSPARENT once it has activated, and
    # ranks other than 0 have their stdout silenced: exactly one line.
    code = ("import os; print(os.environ['TFMPI_TRANSPARENT'] "
            "if 'TFMPI_TRANSPARENT' in os.environ else 'popped')")
    r = tfmpirun("-np", "2", PYTHON, "-c", code, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["popped"], r.stdout + r.stderr


def test_a_misspelt_variable_is_named_once_at_start_up():
    # the script's own tfmpi.init() (after transparent mode's start) does not say it again
    r = tfmpirun("-np", "2", PYTHON, "-c", "import tfmpi; tfmpi.init(); print('ran')",
                 timeout=120, env={"TFMPI_SYNC_BATCHNORMS": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    line = ("tfmpi: TFMPI_SYNC_BATCHNORMS is not a tfmpi variable and is ignored; did you mean "
            "TFMPI_SYNC_BATCHNORM?")
    assert r.stderr.count(line) == 1, r.stderr
    assert r.stdout.splitlines() == ["ran"], r.stdout
    # the check itself under tfmpirun, as one would run it on every host: the start-up
    # hook has not loaded the module it runs (runpy would warn)
    check = tfmpirun("-np", "2", PYTHON, "-m", "tfmpi.params", "--check", timeout=120,
                     env={"TFMPI_SYNC_BATCHNORMS": "1"})
    assert check.returncode == 1, check.stdout + check.stderr
    assert "RuntimeWarning" not in check.stderr and "did you mean" in check.stderr, check.stderr


def test_all_ranks_output():
    r = tfmpirun("-np", "2", "--all-ranks-output", PYTHON, "-c", "print('line-from-rank')", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("line-from-rank") == 2, r.stdout


def test_non_python_command_gets_the_environment():
    r = tfmpirun("-np", "2", "--seed", "11", "sh", "-c", "echo $TFMPI_TRANSPARENT:$TFMPI_SEED", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["1:11", "1:11"], r.stdout


def test_failing_rank_sets_the_exit_status():
    r = tfmpirun("-np", "2", PYTHON, "-c", "import sys; sys.exit(3)", timeout=120)
    assert r.returncode == 3, r.stdout + r.stderr


def test_shim_reports_a_missing_binary(monkeypatch, capsys):
    from tfmpi import launcher
    monkeypatch.setattr(launcher, "launcher_path", lambda: "/nonexistent/bin/tfmpirun")
    assert launcher.main() == 127
    assert "launcher binary is missing" in capsys.readouterr().err


# Note [Stopping the job] (launcher/escalation.h) and Note [Lost peers]
# (planning/liveness.h) on one host; tests/cluster/test_lost_host.py does it across hosts.
FOREVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "allreduce_forever.py")


def _start_forever(env=None):
    """tfmpirun -np 2 training forever; returns (process, {rank: pid}) once both train."""
    full_env = dict(os.environ, TFMPI_ALL_RANKS_OUTPUT="1", **(env or {}))
    proc = subprocess.Popen([shutil.which("tfmpirun"), "-np", "2", PYTHON, FOREVER],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=full_env, start_new_session=True)
    ranks, text, deadline = {}, "", time.monotonic() + 90
    for line in proc.stdout:  # two ranks' lines may share one line of mpirun's output
        text += line
        ranks = {int(r): int(p) for r, p in re.findall(r"rank (\d+) pid (\d+) host", text)}
        if len(ranks) == 2 or time.monotonic() > deadline:
            break
    assert len(ranks) == 2, text
    return proc, ranks


def _finish(proc, timeout):
    """(seconds until exit, output); kills the job and fails after `timeout`."""
    start = time.monotonic()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=10)
        raise AssertionError(f"tfmpirun still ran {timeout} s later:\n{out}")
    return time.monotonic() - start, out


def _assert_gone(pids, timeout):
    deadline = time.monotonic() + timeout
    while any(os.path.exists(f"/proc/{p}") for p in pids):
        assert time.monotonic() < deadline, f"ranks {pids} still run {timeout} s later"
        time.sleep(0.1)


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_ends_the_whole_job_within_10s(signame):
    proc, ranks = _start_forever()
    os.kill(proc.pid, getattr(signal, signame))
    took, out = _finish(proc, 15)
    assert took < 10, out
    assert proc.returncode != 0, out
    _assert_gone(list(ranks.values()), 10 - took)


def test_a_frozen_rank_ends_the_job_naming_it():
    proc, ranks = _start_forever({"TFMPI_PEER_TIMEOUT_SECONDS": "4"})
    os.kill(ranks[1], signal.SIGSTOP)
    took, out = _finish(proc, 60)
    assert proc.returncode != 0, out
    assert "lost contact with rank 1 on host" in out, out
    assert "no reply from rank 1 on host" in out, out  # the warning at half the timeout
    _assert_gone(list(ranks.values()), 10)


@pytest.mark.parametrize("order", ["tfmpi-first", "other-hook-first"])
def test_the_start_up_hook_runs_the_sitecustomize_it_shadows_once(tmp_path, order):
    """tfmpi's hook runs the sitecustomize it shadows (Debian's Python ships one)
    once. A hook before it that chains the same way (the tests' lean_site) loads
    tfmpi's, which must not load that one again: before, the two loaded each
    other until Python's recursion limit."""
    from tfmpi.launcher import site_dir

    shadowed = tmp_path / "debian"
    shadowed.mkdir()
    (shadowed / "sitecustomize.py").write_text("import sys\nsys.stderr.write('SHADOWED RAN\\n')\n")
    lean = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lean_site")
    first = [site_dir(), lean] if order == "tfmpi-first" else [lean, site_dir()]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(first + [str(shadowed)]))
    env.pop("TFMPI_TRANSPARENT", None)
    r = subprocess.run([PYTHON, "-c", "import sys; print(len(sys.meta_path))"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("SHADOWED RAN") == 1, r.stderr
    assert "failed" not in r.stderr, r.stderr
    plain = subprocess.run([PYTHON, "-c", "import sys; print(len(sys.meta_path))"],
                           env=dict(env, PYTHONPATH=str(shadowed)), capture_output=True, text=True,
                           timeout=60)
    assert int(r.stdout) == int(plain.stdout) + 1, "one finder of lean_site's, once"
