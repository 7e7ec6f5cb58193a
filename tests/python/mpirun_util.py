"""Helpers for tests that start processes under mpirun (always with a timeout)."""

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def mpirun_command(np_):
    """mpirun argv prefix for -np np_, adding Open MPI's root/oversubscribe flags."""
    exe = shutil.which("mpirun") or shutil.which("mpiexec")
    if exe is None:
        raise RuntimeError("mpirun not found: install openmpi-bin (scripts/setup.sh does)")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    cmd = [exe, "-np", str(np_)]
    if "Open MPI" in out or "OpenRTE" in out:
        cmd += ["--oversubscribe", "--bind-to", "none"]
        if os.geteuid() == 0:
            cmd += ["--allow-run-as-root"]
    return cmd


def run(argv, timeout, env=None):
    """Run argv with a timeout; returns CompletedProcess (stdout+stderr in .stdout)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    try:
        return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout, env=full_env)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        raise AssertionError(f"timed out after {timeout} s (a hang): {argv}\n{out}") from None


def run_into(argv, out, env=None, timeout=300):
    """Runs argv + [out] with TensorFlow's C++ logs quiet: `out` is a new folder
    (made here) that the command writes into. Asserts it succeeded."""
    out.mkdir()
    r = run(argv + [str(out)], timeout, env={"TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})})
    assert r.returncode == 0, r.stdout
    return r


def run_python(np_, args, timeout=240, env=None):
    return run(mpirun_command(np_) + [sys.executable] + args, timeout, env)
