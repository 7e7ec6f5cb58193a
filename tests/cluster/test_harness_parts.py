"""The harness's parts that run anywhere, without root: the rsh agent (with a stand-in for
`ip`), cgroup detection from mount tables, the cgroup v2 files (on a fake hierarchy,
since a machine has either v1's or v2's cpu controller), names and options."""

import os
import re
import shutil
import subprocess

import pytest

import cpu_cgroups
import harness
import netns
import rsh_agent

FAKE_IP = """#!/bin/sh
# Stands in for `ip netns exec NS COMMAND...`: records NS, runs COMMAND here.
echo "$3" > "$(dirname "$0")/netns-used"
shift 3
exec "$@"
"""


def _agent(tmp_path, cgroup_mount=""):
    fake_ip = tmp_path / "ip"
    fake_ip.write_text(FAKE_IP)
    fake_ip.chmod(0o755)
    procs = [tmp_path / "cpu.procs", tmp_path / "cpuacct.procs"]
    hosts = [rsh_agent.AgentHost(("198.18.7.10", "run-h0"), "run-h0", ()),
             rsh_agent.AgentHost(("198.18.7.11", "run-h1"), "run-h1", tuple(map(str, procs)))]
    env = rsh_agent.clean_environment("/usr/bin:/bin")
    agent = rsh_agent.write_agent(str(tmp_path / "agent"), hosts,
                                  {"ip": str(fake_ip), "env": shutil.which("env")}, env, "run",
                                  cgroup_mount=cgroup_mount)
    return agent, procs, env


def test_agent_runs_the_command_in_the_hosts_namespace_and_cgroup(tmp_path):
    agent, procs, env = _agent(tmp_path)
    # Open MPI may pass ssh options and user@host; the command arrives in several words.
    proc = subprocess.run([agent, "-x", "-o", "BatchMode=yes", "me@198.18.7.11",
                           "echo", "$$;", "env;", "pwd"],
                          capture_output=True, text=True, timeout=30,
                          env={**os.environ, "TFMPI_TEST_MARKER": "1"})
    assert proc.returncode == 0, proc.stderr
    pid, *env_lines, cwd = proc.stdout.splitlines()
    seen = dict(line.split("=", 1) for line in env_lines)
    assert "TFMPI_TEST_MARKER" not in seen
    assert {k: seen[k] for k in env} == env
    assert set(seen) - set(env) <= {"PWD", "SHLVL", "_"}
    assert cwd == (env["HOME"] if os.path.isdir(env["HOME"]) else "/")  # as sshd does
    assert (tmp_path / "netns-used").read_text().strip() == "run-h1"
    # Every step execs: the pid moved into the cgroups is the command's own.
    assert [p.read_text().strip() for p in procs] == [pid, pid]


@pytest.mark.parametrize("mount", ["echo mounted > {}/mount-ran", "echo failed >&2; false"])
def test_agent_mounts_the_cgroup_hierarchy_first_and_goes_on_if_that_fails(tmp_path, mount):
    # The mount commands run inside the namespace, before the command; a failure is silent
    # and the command still runs, with the same pid in the cgroups.
    agent, procs, _ = _agent(tmp_path, cgroup_mount=mount.format(tmp_path))
    proc = subprocess.run([agent, "198.18.7.11", "echo", "$$"], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert [p.read_text().strip() for p in procs] == [proc.stdout.strip()] * 2
    assert (tmp_path / "mount-ran").exists() == mount.startswith("echo mounted")


def test_agent_refuses_unknown_hosts_and_missing_commands(tmp_path):
    agent, _, _ = _agent(tmp_path)
    for argv in ([agent, "198.18.7.99", "true"], [agent, "198.18.7.10"]):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 255 and proc.stderr


def test_agent_fails_when_the_cgroup_cannot_be_entered(tmp_path):
    agent, procs, _ = _agent(tmp_path)
    procs[0].mkdir()  # writing a pid to a folder fails
    proc = subprocess.run([agent, "run-h1", "true"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 255 and "cannot move into cgroup" in proc.stderr


def test_hostfile_has_one_line_per_host(tmp_path):
    path = rsh_agent.write_hostfile(str(tmp_path / "hosts"), ["198.18.0.10", "198.18.0.11"], [1, 2])
    assert open(path).read() == "198.18.0.10 slots=1\n198.18.0.11 slots=2\n"
    path = rsh_agent.write_hostfile(str(tmp_path / "hosts.mpich"), ["198.18.0.10", "198.18.0.11"],
                                    [1, 2], mpich=True)
    assert open(path).read() == "198.18.0.10:1\n198.18.0.11:2\n"


V1_SEPARATE = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V1_COMOUNTED = """\
25 24 0:22 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:8 - cgroup cgroup rw,cpu,cpuacct
26 24 0:23 / /sys/fs/cgroup/cpuset rw,nosuid shared:9 - cgroup cgroup rw,cpuset
"""


def test_detect_prefers_cgroup_v1_cpu_and_finds_cpuacct():
    controller, _ = cpu_cgroups.detect(V1_SEPARATE)
    assert isinstance(controller, cpu_cgroups.V1Controller)
    assert controller.roots == ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct")
    controller, _ = cpu_cgroups.detect(V1_COMOUNTED)
    assert controller.roots == ("/sys/fs/cgroup/cpu,cpuacct",)
    assert controller.cpuacct_root == controller.cpu_root


def test_the_mount_script_remounts_the_cpu_hierarchy_with_its_controllers():
    # what the agent runs in a host's private /sys, so that ranks can read their quota
    separate = cpu_cgroups.detect(V1_SEPARATE)[0].mount_script()
    assert separate.endswith("mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu"), separate
    comounted = cpu_cgroups.detect(V1_COMOUNTED)[0].mount_script()
    assert comounted.endswith("-o cpu,cpuacct cgroup /sys/fs/cgroup/cpu,cpuacct"), comounted
    assert cpu_cgroups.V2Controller("/x").mount_script() == \
        "mount -t cgroup2 cgroup2 /sys/fs/cgroup"


def _fake_v2(tmp_path, controllers="cpuset cpu io memory pids"):
    root = tmp_path / "cg 2"  # a space, escaped as \040 in mountinfo
    root.mkdir()
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text("")
    mountinfo = f"30 23 0:26 / {str(root).replace(' ', chr(92) + '040')} rw - cgroup2 cgroup2 rw\n"
    return root, mountinfo


def test_detect_finds_cgroup_v2_only_with_its_cpu_controller(tmp_path):
    root, mountinfo = _fake_v2(tmp_path)
    controller, reason = cpu_cgroups.detect(mountinfo)
    assert isinstance(controller, cpu_cgroups.V2Controller) and controller.root == str(root)
    (root / "cgroup.controllers").write_text("memory pids\n")
    controller, reason = cpu_cgroups.detect(mountinfo)
    assert controller is None and "cpu controller" in reason
    assert cpu_cgroups.detect("")[0] is None


def test_v2_controller_writes_cpu_max_and_enables_the_controller(tmp_path):
    root, mountinfo = _fake_v2(tmp_path)
    controller = cpu_cgroups.detect(mountinfo)[0]
    real_mkdir = os.mkdir

    def mkdir_with_files(path, *args):  # a real cgroupfs creates the control files itself
        real_mkdir(path, *args)
        open(os.path.join(path, "cgroup.subtree_control"), "w").close()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cpu_cgroups.os, "mkdir", mkdir_with_files)
        groups = controller.create("run", ["h0", "h1"])
    assert (root / "cgroup.subtree_control").read_text() == "+cpu"
    assert (root / "run" / "cgroup.subtree_control").read_text() == "+cpu"
    groups["h0"].set_quota(0.25)
    groups["h1"].set_quota(None)
    assert (root / "run" / "h0" / "cpu.max").read_text() == "25000 100000"
    assert (root / "run" / "h1" / "cpu.max").read_text() == "max 100000"
    (root / "run" / "h0" / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    assert groups["h0"].usage_seconds() == 2.5
    assert groups["h0"].procs_files == [str(root / "run" / "h0" / "cgroup.procs")]
    assert controller.runs(re.compile("r.n")) == {"run"}


def test_v1_controller_writes_period_and_quota(tmp_path):
    cpu, acct = tmp_path / "cpu", tmp_path / "cpuacct"
    cpu.mkdir()
    acct.mkdir()
    controller = cpu_cgroups.V1Controller(str(cpu), str(acct))
    group = controller.create("run", ["h0"])["h0"]
    group.set_quota(1.5)
    assert (cpu / "run" / "h0" / "cpu.cfs_quota_us").read_text() == "150000"
    assert (cpu / "run" / "h0" / "cpu.cfs_period_us").read_text() == "100000"
    group.set_quota(None)
    assert (cpu / "run" / "h0" / "cpu.cfs_quota_us").read_text() == "-1"
    (acct / "run" / "h0" / "cpuacct.usage").write_text("1500000000\n")
    assert group.usage_seconds() == 1.5
    with pytest.raises(ValueError):
        group.set_quota(0)


def test_names_fit_in_interface_names():
    for prefix in ("x", "tfmc"):
        cluster = harness.EmulatedCluster(hosts=100, name_prefix=prefix)
        names = netns.Network(cluster.run_name, 100)
        longest = [names.bridge, names.veths[-1], f"{cluster.run_name}-p99"]
        assert all(len(n) <= 15 for n in longest), longest
    with pytest.raises(ValueError):
        harness.EmulatedCluster(name_prefix="toolong")
    with pytest.raises(ValueError):
        harness.EmulatedCluster(hosts=3, cpu_quota=[1.0, 0.5])


def test_tbf_bucket_holds_at_least_a_few_packets():
    args = netns.tbf_args(1)
    assert args[:3] == ["tbf", "rate", "1mbit"] and int(args[4]) >= 16 * 1024
    assert int(netns.tbf_args(10_000)[4]) == int(10_000e6 / 8 / 250)
