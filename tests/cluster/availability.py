"""Whether the emulated cluster can run here, and if not, why (for skip messages).

Each probe creates what the harness needs in a throwaway namespace or cgroup and
removes it, so a positive answer means the real thing will work."""

import functools
import os
import re
import shutil
import subprocess

import cpu_cgroups
import netns

PROBE_PREFIX = "tfmprobe"


def tools():
    """Absolute paths of the commands the harness and its agent run (None: missing)."""
    found = {name: netns.tool(name) for name in ("ip", "tc", "unshare", "hostname", "env")}
    found["mpirun"] = shutil.which("mpirun")
    return found


def _first_error(argvs):
    for argv in argvs:
        try:
            proc = netns.run(argv, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"`{' '.join(argv)}`: {e}"
        if proc.returncode != 0:
            return f"`{' '.join(argv)}` failed: {proc.stderr.strip()}"
    return None


@functools.lru_cache(maxsize=None)
def _network_reasons():
    """(reason the network cannot be built, reason bandwidth cannot be limited)."""
    ip, tc = tools()["ip"], tools()["tc"]
    ns = f"{PROBE_PREFIX}{os.getpid()}"
    if ip is None:
        return "no `ip` command (install iproute2)", "no `ip` command"
    netns.run([ip, "netns", "del", ns], check=False)
    error = _first_error([[ip, "netns", "add", ns]])
    if error:
        return f"cannot create a network namespace: {error}", "no network namespaces"
    try:
        net = _first_error([
            [ip, "-n", ns, "link", "add", "pa", "type", "veth", "peer", "name", "pb"],
            [ip, "-n", ns, "link", "add", "pbr", "type", "bridge"],
            [ip, "-n", ns, "link", "set", "pa", "master", "pbr"],
            [ip, "-n", ns, "link", "set", "lo", "up"],
        ])
        if tc is None:
            bandwidth = "no `tc` command (install iproute2)"
        else:
            bandwidth = _first_error([[tc, "-n", ns, "qdisc", "add", "dev", "lo", "root",
                                       *netns.tbf_args(10)]])
            if bandwidth:
                bandwidth = f"the tbf qdisc is not available: {bandwidth}"
    finally:
        netns.run([ip, "netns", "del", ns], check=False)
    return (f"cannot create veth pairs or bridges: {net}" if net else None), bandwidth


@functools.lru_cache(maxsize=None)
def _cgroup_reason():
    controller, reason = cpu_cgroups.detect()
    if controller is None:
        return reason
    run = f"{PROBE_PREFIX}{os.getpid()}"
    try:
        hosts = controller.create(run, ["h0"])
        hosts["h0"].set_quota(0.5)
        hosts["h0"].usage_seconds()
    except (OSError, cpu_cgroups.CgroupError) as e:
        return f"cannot create a CPU-limited cgroup with {controller!r}: {e}"
    finally:
        controller.remove(run, timeout=2)
    return None


@functools.lru_cache(maxsize=None)
def _mpi_reason():
    mpirun = tools()["mpirun"]
    if mpirun is None:
        return "no mpirun on PATH (install openmpi-bin)"
    try:
        out = subprocess.run([mpirun, "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"`mpirun --version` failed: {e}"
    if not re.search(r"Open MPI|OpenRTE", out):
        first = out.strip().splitlines()[:1]
        return f"mpirun is not Open MPI ({first}); the harness needs Open MPI"
    return None


def unavailable_reason():
    """Why the emulated cluster cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs, cgroups); CI runs these tests as root"
    missing = [n for n in ("ip", "env") if tools()[n] is None]
    if missing:
        return f"missing commands: {', '.join(missing)} (install iproute2, coreutils)"
    return _network_reasons()[0] or _cgroup_reason() or _mpi_reason()


def bandwidth_unavailable_reason():
    """Why link bandwidth cannot be limited here (tbf), or None."""
    return unavailable_reason() or _network_reasons()[1]
