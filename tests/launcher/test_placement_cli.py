"""The installed tfmpirun's placement options and host pool checks, end to end
on this machine: bad hostfiles and -np beyond the pool's slots are refused
before anything starts, and `--placement aware --dry-run` probes, prints the
table and the decision on stderr and the command on stdout. Every run has a
timeout. Run with the installed tfmpi's bin folder first on PATH."""

import shutil
import subprocess
import sys

import pytest

PYTHON = sys.executable


def launch(*args, timeout=60):
    exe = shutil.which("tfmpirun")
    if exe is None:
        pytest.skip("tfmpirun is not on PATH: install tfmpi first")
    try:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"tfmpirun {args} hung for {timeout} s") from e


def test_malformed_hostfile_lines_are_named_with_their_line(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("# pool\nnode1 slots=2\nnode2 slots=two\nnode3 slots=0\nnode1 slots=1\n")
    r = launch("-np", "2", "--hostfile", str(hosts), "--dry-run", PYTHON, "-c", "pass")
    assert r.returncode == 2, r
    assert r.stdout == ""
    assert f"{hosts}:3: 'slots=two': expected slots=N or max_slots=N" in r.stderr, r.stderr
    assert f"{hosts}:4: host node3: slots must be at least 1 (got 0)" in r.stderr, r.stderr
    assert f"{hosts}:5: host node1 is already listed on line 2" in r.stderr, r.stderr


def test_more_ranks_than_slots_is_refused_unless_oversubscribing(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("node1 slots=1\nnode2:1\n")
    r = launch("-np", "3", "--hostfile", str(hosts), "--dry-run", PYTHON, "-c", "pass")
    assert r.returncode == 2, r
    assert "-np 3 is more than the 2 slots of" in r.stderr, r.stderr
    r = launch("-np", "3", "--hostfile", str(hosts), "--mpi-args", "--oversubscribe", "--dry-run",
               PYTHON, "-c", "pass")
    assert r.returncode == 0, r.stderr
    assert f"--hostfile {hosts}" in r.stdout  # default placement: the file as given


def test_aware_placement_needs_a_pool():
    r = launch("-np", "2", "--placement", "aware", PYTHON, "-c", "pass")
    assert r.returncode == 2
    assert "--placement aware needs a pool of hosts" in r.stderr, r.stderr


def test_aware_dry_run_prints_the_table_decision_and_command(tmp_path):
    out = tmp_path / "probe.json"
    r = launch("-np", "2", "-H", "localhost:2", "--placement", "aware", "--probe-json", str(out),
               "--dry-run", PYTHON, "-c", "pass")
    assert r.returncode == 0, r.stderr
    assert "probing 1 host " in r.stderr and "GFLOP/s" in r.stderr, r.stderr
    assert "chosen: localhost:2" in r.stderr, r.stderr
    line = r.stdout.strip()
    assert len(r.stdout.splitlines()) == 1, r.stdout
    assert "TFMPI_PROBE_SPEEDS=1.000,1.000 " in line, line
    assert " -H localhost:2 " in line and "--hostfile" not in line, line
    assert '"rank_speeds"' in out.read_text()


def test_aware_host_that_cannot_be_reached_is_left_out(tmp_path):
    # The remote shell is `false`: reaching the other host fails at once, and
    # nothing goes over the network; localhost is started without it.
    r = launch("-np", "1", "-H", "localhost:1,no-such-host.invalid:1", "--placement", "aware",
               "--probe-timeout", "15", "--mpi-args", "--mca plm_rsh_agent false", "--dry-run",
               PYTHON, "-c", "pass", timeout=90)
    assert r.returncode == 0, r.stderr
    assert "no-such-host.invalid" in r.stderr and "left out: unreachable" in r.stderr, r.stderr
    assert " -H localhost:1 " in r.stdout, r.stdout
