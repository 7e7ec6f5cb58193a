"""Finding and removing everything a run created, by its name alone.

Teardown does not rely on the state of the object that built the cluster, so it also
removes half-built clusters and the leftovers of runs that were killed (SIGKILL, a crash):
`harness.py cleanup` finds those by the name prefix. Order matters: processes first
(deleting a namespace does not end the processes in it, and a cgroup with processes cannot
be removed), then namespaces and links, then cgroups, then the run's temporary folder.
"""

import glob
import os
import re
import shutil
import signal
import tempfile
import time

import cpu_cgroups
import netns


def run_pattern(prefix):
    return re.compile(re.escape(prefix) + r"[0-9a-f]{6}")


def _controller():
    return cpu_cgroups.detect()[0]


def _temp_roots():
    # Remote commands start without TMPDIR, so Open MPI's daemons use /tmp.
    return sorted({tempfile.gettempdir(), "/tmp"})


def temp_dirs(run_name):
    """The run's folder, and the session folders of its Open MPI daemons (named after
    their host: every host has its own /tmp on a real cluster, they share one here)."""
    found = []
    for root in _temp_roots():
        for pattern in (f"{glob.escape(run_name)}-*", f"ompi.{glob.escape(run_name)}-h*"):
            found += glob.glob(os.path.join(root, pattern))
    return sorted(set(found))


def _start_time(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def write_owner(folder):
    """Record the process that owns the run, so `cleanup` leaves live runs alone."""
    with open(os.path.join(folder, "owner"), "w") as f:
        f.write(f"{os.getpid()} {_start_time(os.getpid())}\n")


def owner_alive(run_name):
    for folder in glob.glob(os.path.join(tempfile.gettempdir(), glob.escape(run_name) + "-*")):
        try:
            with open(os.path.join(folder, "owner")) as f:
                pid, start = f.read().split()
        except (OSError, ValueError):
            continue
        if _start_time(int(pid)) == start:
            return True
    return False


def _ancestors():
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return pids


def _launcher_pids(run_name):
    """Processes whose command line names the run's folder: mpirun (or tfmpirun) started
    with the cluster's agent or hostfile, which run in the root namespace."""
    needle = f"{os.sep}{run_name}-".encode()
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if needle in f.read():
                        pids.add(int(entry))
            except OSError:
                pass
    return pids


def is_running(pid):
    """Exists and is not a zombie (an ended process its parent has not reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def host_pids(run_name):
    """Live processes in the run's namespaces or cgroups."""
    pids = set()
    for ns in netns.namespaces():
        if re.fullmatch(re.escape(run_name) + r"-h\d+", ns):
            pids |= netns.netns_pids(ns)
    controller = _controller()
    if controller is not None:
        for group in controller.host_groups(run_name):
            pids |= group.pids()
    return {p for p in pids - _ancestors() if is_running(p)}


def launcher_pids(run_name):
    return {p for p in _launcher_pids(run_name) - _ancestors() if is_running(p)}


def run_pids(run_name):
    """The run's processes, on its hosts and launching it (never this process or its
    ancestors)."""
    return host_pids(run_name) | launcher_pids(run_name)


def _signal_until_gone(list_pids, sig, seconds):
    deadline = time.monotonic() + seconds
    while True:
        pids = list_pids()
        if not pids or time.monotonic() > deadline:
            return pids
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def kill_run_processes(run_name, timeout=10.0):
    """End every process of the run; returns those still there.

    The hosts' processes get SIGKILL. With its daemons gone, mpirun ends by itself and
    removes its session folder; a launcher still there after a moment gets SIGTERM, then
    SIGKILL (mpirun ignores SIGTERM while it waits for a lost host), and its session
    folder is removed for it."""
    left = _signal_until_gone(lambda: host_pids(run_name), signal.SIGKILL, timeout)
    launchers = launcher_pids(run_name)
    _signal_until_gone(lambda: launchers & launcher_pids(run_name), 0, 2.0)
    _signal_until_gone(lambda: launchers & launcher_pids(run_name), signal.SIGTERM, 2.0)
    left |= _signal_until_gone(lambda: launcher_pids(run_name), signal.SIGKILL, timeout)
    for pid in launchers - left:
        for root in _temp_roots():
            for folder in glob.glob(os.path.join(root, "ompi.*", f"pid.{pid}")):
                shutil.rmtree(folder, ignore_errors=True)
    return left


def teardown(run_name):
    """Remove everything of a run (idempotent). Returns a list of what could not be removed."""
    problems = [f"process {p}" for p in sorted(kill_run_processes(run_name))]
    problems += [f"namespace or link {n}" for n in netns.destroy(run_name)]
    controller = _controller()
    if controller is not None:
        problems += [f"cgroup {d}" for d in controller.remove(run_name)]
    for folder in temp_dirs(run_name):
        shutil.rmtree(folder, ignore_errors=True)
    return problems


def leftovers(run_name):
    """Everything of the run that still exists, by kind (all lists empty: clean)."""
    pattern = re.compile(re.escape(run_name) + r"-(h\d+|p\d+|br)")
    controller = _controller()
    cgroups = [] if controller is None else [
        d for d in controller.run_dirs(run_name) if os.path.exists(d)]
    return {
        "namespaces": [n for n in netns.namespaces() if pattern.fullmatch(n)],
        "links": [n for n in netns.links() if pattern.fullmatch(n)],
        "cgroups": cgroups,
        "temp_dirs": temp_dirs(run_name),
        "processes": sorted(run_pids(run_name)),
    }


def find_runs(prefix):
    """Names of runs with this prefix that left something behind on the machine."""
    pattern = run_pattern(prefix)
    named = re.compile(pattern.pattern + "(?=-)")
    names = {m.group(0) for n in netns.namespaces() + netns.links()
             for m in [named.match(n)] if m}
    for root in _temp_roots():
        for folder in glob.glob(os.path.join(root, prefix + "*")) + glob.glob(
                os.path.join(root, "ompi." + prefix + "*")):
            m = named.match(os.path.basename(folder).removeprefix("ompi."))
            if m:
                names.add(m.group(0))
    controller = _controller()
    if controller is not None:
        names |= controller.runs(pattern)
    return sorted(names)
