"""`tfmpirun --placement aware` across emulated hosts (harness.py): the probes
measure every host at once, a host held to a small CPU quota or cut off from
the network is left out with its reason, the job's ranks run on the hosts
chosen, and too few usable slots is a clear error. Needs root, namespaces and
cgroups (see conftest.py); every launch has a timeout."""

import json
import os
import re
import secrets
import subprocess
import sys
import time

import pytest

import cpu_cgroups
import harness

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TESTS, "python"))

from mpirun_util import run  # noqa: E402

# Placement follows the speeds the probes measure, and a probe is bounded in
# time: run alone (scripts/test.sh).
pytestmark = pytest.mark.measures_speed

# Each rank says where it runs and what it was told; no MPI or Python needed.
WHERE = ["sh", "-c", 'echo "WHERE rank=$OMPI_COMM_WORLD_RANK host=$(hostname) '
                     'speeds=$TFMPI_PROBE_SPEEDS"']


def cluster_or_skip(**kwargs):
    reason = harness.unavailable_reason()
    if reason:
        pytest.skip(f"emulated cluster unavailable: {reason}")
    return harness.EmulatedCluster(**kwargs)


def aware(cluster, np_, json_path, timeout_s=8):
    return run(["tfmpirun", "-np", str(np_), "--placement", "aware", "--probe-timeout",
                str(timeout_s), "--probe-json", str(json_path), *cluster.tfmpirun_args(), *WHERE],
               120)


def ranks(output):
    return {int(m.group(1)): (m.group(2), m.group(3))
            for m in re.finditer(r"WHERE rank=(\d+) host=(\S+) speeds=(\S*)", output)}


# How host 2 is slowed: a small quota, or busy loops sharing its (half-core) quota.
SLOW = {"quota": (0.15, 0), "background_load": (0.5, 3)}


@pytest.mark.parametrize("how", sorted(SLOW))
def test_slow_host_is_left_out_and_ranks_run_on_the_others(tmp_path, how):
    quota, busy_loops = SLOW[how]
    with cluster_or_skip(hosts=3, cpu_quota=[None, None, quota]) as cluster:
        if busy_loops:
            cluster.start_load(2, procs=busy_loops)
        r = aware(cluster, 2, tmp_path / "probe.json")
        assert r.returncode == 0, r.stdout
        names = [h.name for h in cluster.hosts]
        seen = ranks(r.stdout)
        assert sorted(seen) == [0, 1], r.stdout
        assert [seen[0][0], seen[1][0]] == names[:2], r.stdout  # pool order, slot by slot
        speeds = seen[0][1].split(",")
        assert len(speeds) == 2 and seen[1][1] == seen[0][1], r.stdout
        assert max(float(s) for s in speeds) == 1.0, r.stdout
        report = json.loads((tmp_path / "probe.json").read_text())
        slow = report["hosts"][2]
        assert slow["chosen_slots"] == 0 and slow["reason"].startswith("left out: slower"), report
        assert "left out: slower" in r.stdout  # the table
        assert "chosen: " in r.stdout and "TFMPI_PROBE_SPEEDS=" in r.stdout


def test_unreachable_host_is_left_out_in_bounded_time_and_too_few_slots_fail(tmp_path):
    with cluster_or_skip(hosts=3) as cluster:
        cluster.link_down(2)
        lost = cluster.hosts[2].address

        start = time.monotonic()
        r = aware(cluster, 3, tmp_path / "few.json", timeout_s=6)
        assert r.returncode == 2, r.stdout
        assert "--placement aware: -np 3 needs 3 slots but only 2" in r.stdout, r.stdout
        assert "WHERE" not in r.stdout  # nothing launched
        assert time.monotonic() - start < 60, r.stdout

        start = time.monotonic()
        r = aware(cluster, 2, tmp_path / "probe.json", timeout_s=6)
        took = time.monotonic() - start
        assert r.returncode == 0, r.stdout
        assert took < 60, (took, r.stdout)
        seen = ranks(r.stdout)
        assert [seen[0][0], seen[1][0]] == [cluster.hosts[0].name, cluster.hosts[1].name], r.stdout
        report = json.loads((tmp_path / "probe.json").read_text())
        host = report["hosts"][2]
        assert host["name"] == lost and host["chosen_slots"] == 0, report
        assert host["reason"].startswith("left out: unreachable"), report
        assert f"probe of {lost} " in r.stdout  # progress on stderr


def probe_program():
    import tfmpi.launcher  # the installed package: tfmpi-probe is next to tfmpirun
    return os.path.join(os.path.dirname(tfmpi.launcher.launcher_path()), "tfmpi-probe")


def node_probe(shell_prefix=""):
    r = subprocess.run(["sh", "-c", f"{shell_prefix}exec {probe_program()} node --seconds 0.5"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("TFMPI_PROBE_NODE ")]
    assert len(line) == 1, r.stdout
    return json.loads(line[0].split(" ", 1)[1])


def test_probe_reads_the_cgroup_quota_and_its_benchmark_shows_it(need_cluster):
    """Outside a network namespace the cgroup hierarchy is visible: the quota is
    read, and the wall-clock benchmark drops with it."""
    controller = cpu_cgroups.detect()[0]
    run_name = harness.DEFAULT_PREFIX + secrets.token_hex(3)
    group = controller.create(run_name, ["q"])["q"]
    try:
        group.set_quota(0.1)
        enter = "".join(f"echo $$ > {f}; " for f in group.procs_files)
        limited = node_probe(enter)
        free = node_probe()
    finally:
        controller.remove(run_name)
    assert limited["cpu_quota"] == pytest.approx(0.1), limited
    assert limited["quota_source"].startswith("cgroup v"), limited
    assert limited["bench_gflops"] < 0.6 * free["bench_gflops"], (limited, free)
