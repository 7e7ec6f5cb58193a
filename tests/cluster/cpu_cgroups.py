"""CPU cgroups for emulated hosts: one cgroup per host with its own CPU quota.

Two implementations with one interface, chosen by `detect()` from the mounts:
  - V1Controller: cgroup v1's `cpu` hierarchy (cpu.cfs_quota_us / cpu.cfs_period_us),
    plus `cpuacct` for CPU usage when it is mounted (co-mounted or on its own);
  - V2Controller: the unified hierarchy (cpu.max, cpu.stat usage_usec).
A run's cgroups live at <root>/<run>/<host> in every hierarchy used. A process is
placed in a host by writing its pid to every path of `HostCgroup.procs_files`.
"""

import errno
import os
import re
import shlex
import time

PERIOD_US = 100_000
MIN_QUOTA_US = 1_000


class CgroupError(RuntimeError):
    pass


def _read(path):
    with open(path) as f:
        return f.read()


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _unescape(field):
    """Mount points in mountinfo escape space, tab, newline and backslash as \\ooo."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text):
    """[(mount point, fstype, super options as a set)] for every cgroup mount."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        mounts.append((_unescape(fields[4]), tail[0], set(tail[2].split(","))))
    return mounts


class HostCgroup:
    """One host's cgroup: a folder in each hierarchy the controller uses."""

    def __init__(self, controller, dirs):
        self.controller = controller
        self.dirs = dirs

    @property
    def procs_files(self):
        return [os.path.join(d, "cgroup.procs") for d in self.dirs]

    def add_pid(self, pid):
        for path in self.procs_files:
            _write(path, str(pid))

    def pids(self):
        found = set()
        for path in self.procs_files:
            try:
                found.update(int(p) for p in _read(path).split())
            except FileNotFoundError:
                pass
        return found

    def set_quota(self, fraction):
        """Limit the host to `fraction` of one core (None: unlimited)."""
        self.controller.set_quota(self, fraction)

    def usage_seconds(self):
        """CPU seconds used by the host's processes since the cgroup was created."""
        return self.controller.usage_seconds(self)


def _proc_cpu_seconds(pids):
    """utime + stime of live processes (fallback when no usage counter is mounted)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = _read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def _quota_us(fraction):
    if fraction is None:
        return None
    if fraction <= 0:
        raise ValueError(f"CPU quota must be a positive fraction of a core or None, got {fraction}")
    return max(MIN_QUOTA_US, int(round(fraction * PERIOD_US)))


class _Controller:
    """Shared layout: <root>/<run>/<host> under each of `self.roots`."""

    version = None
    roots = ()

    def create(self, run, host_names):
        for root in self.roots:
            os.mkdir(os.path.join(root, run))
        self._prepare_run(run)
        hosts = {}
        for name in host_names:
            dirs = [os.path.join(root, run, name) for root in self.roots]
            for d in dirs:
                os.mkdir(d)
            hosts[name] = HostCgroup(self, dirs)
        return hosts

    def _prepare_run(self, run):
        pass

    def run_dirs(self, run):
        return [os.path.join(root, run) for root in self.roots]

    def runs(self, pattern):
        """Names of run folders matching the compiled regex `pattern` (for leftovers)."""
        names = set()
        for root in self.roots:
            try:
                names.update(n for n in os.listdir(root) if pattern.fullmatch(n))
            except FileNotFoundError:
                pass
        return names

    def host_groups(self, run):
        """HostCgroup objects for a run's existing host folders."""
        names = set()
        for d in self.run_dirs(run):
            if os.path.isdir(d):
                names.update(n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n)))
        return [HostCgroup(self, [os.path.join(d, n) for d in self.run_dirs(run)])
                for n in sorted(names)]

    def remove(self, run, timeout=10.0):
        """Remove a run's folders (their processes must be gone). Returns what is left."""
        deadline = time.monotonic() + timeout
        left = []
        for d in self.run_dirs(run):
            if not os.path.isdir(d):
                continue
            children = [os.path.join(d, n) for n in os.listdir(d)
                        if os.path.isdir(os.path.join(d, n))]
            for path in children + [d]:
                if not _rmdir_retry(path, deadline):
                    left.append(path)
        return left


def _rmdir_retry(path, deadline):
    while True:
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError as e:
            # EBUSY while exiting processes are still being removed from the group.
            if e.errno != errno.EBUSY or time.monotonic() > deadline:
                return False
            time.sleep(0.05)


class V1Controller(_Controller):
    version = 1

    def __init__(self, cpu_root, cpuacct_root=None, cpu_options=("cpu",)):
        self.cpu_root = cpu_root
        self.cpuacct_root = cpuacct_root
        self.cpu_options = tuple(cpu_options)  # the controllers of the cpu hierarchy
        self.roots = (cpu_root,) if cpuacct_root in (None, cpu_root) else (cpu_root, cpuacct_root)

    def mount_script(self):
        """Shell commands that show this hierarchy in a namespace whose /sys has none."""
        folder = shlex.quote("/sys/fs/cgroup/" + os.path.basename(self.cpu_root.rstrip("/")))
        return (f"mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup && mkdir -p {folder} && "
                f"mount -t cgroup -o {','.join(self.cpu_options)} cgroup {folder}")

    def set_quota(self, group, fraction):
        quota = _quota_us(fraction)
        cpu_dir = group.dirs[0]
        _write(os.path.join(cpu_dir, "cpu.cfs_period_us"), str(PERIOD_US))
        _write(os.path.join(cpu_dir, "cpu.cfs_quota_us"), str(-1 if quota is None else quota))

    def usage_seconds(self, group):
        if self.cpuacct_root is None:
            return _proc_cpu_seconds(group.pids())
        acct_dir = group.dirs[-1]
        return int(_read(os.path.join(acct_dir, "cpuacct.usage"))) / 1e9

    def __repr__(self):
        return f"cgroup v1 (cpu: {self.cpu_root}, cpuacct: {self.cpuacct_root})"


def _tokens(path):
    return {t.lstrip("+") for t in _read(path).split()}


class V2Controller(_Controller):
    version = 2

    def __init__(self, root):
        self.root = root
        self.roots = (root,)

    def mount_script(self):
        """Shell commands that show this hierarchy in a namespace whose /sys has none."""
        return "mount -t cgroup2 cgroup2 /sys/fs/cgroup"

    def _enable_cpu(self, folder):
        control = os.path.join(folder, "cgroup.subtree_control")
        if "cpu" in _tokens(control):
            return
        try:
            _write(control, "+cpu")
        except OSError as e:
            hint = (" (processes live in that cgroup, and v2 only lets a cgroup without "
                    "processes hand controllers to its children)") if e.errno == errno.EBUSY else ""
            raise CgroupError(f"cgroup v2: cannot enable the cpu controller in {control}: "
                              f"{e.strerror}{hint}") from None

    def _prepare_run(self, run):
        self._enable_cpu(self.root)
        self._enable_cpu(os.path.join(self.root, run))

    def set_quota(self, group, fraction):
        quota = _quota_us(fraction)
        _write(os.path.join(group.dirs[0], "cpu.max"),
               f"{'max' if quota is None else quota} {PERIOD_US}")

    def usage_seconds(self, group):
        for line in _read(os.path.join(group.dirs[0], "cpu.stat")).splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
        raise CgroupError(f"no usage_usec in {group.dirs[0]}/cpu.stat")

    def __repr__(self):
        return f"cgroup v2 ({self.root})"


def detect(mountinfo_text=None):
    """(controller, None) for the cgroup CPU controller mounted here, or (None, reason).

    cgroup v1's cpu hierarchy wins when it is mounted (on hybrid systems the cpu
    controller is then bound to v1, and the unified hierarchy cannot use it)."""
    if mountinfo_text is None:
        mountinfo_text = _read("/proc/self/mountinfo")
    mounts = parse_mountinfo(mountinfo_text)
    cpu = [(m, opts) for m, fs, opts in mounts if fs == "cgroup" and "cpu" in opts]
    if cpu:
        acct = [m for m, fs, opts in mounts if fs == "cgroup" and "cpuacct" in opts]
        controllers = sorted(o for o in cpu[0][1] if o in ("cpu", "cpuacct"))
        return V1Controller(cpu[0][0], acct[0] if acct else None, controllers), None
    for mount, fs, _ in mounts:
        if fs != "cgroup2":
            continue
        try:
            if "cpu" in _read(os.path.join(mount, "cgroup.controllers")).split():
                return V2Controller(mount), None
        except OSError:
            continue
    if any(fs == "cgroup2" for _, fs, _ in mounts):
        return None, ("cgroup v2 is mounted but its cpu controller is not available "
                      "(not in cgroup.controllers of its root)")
    return None, "no cgroup cpu controller is mounted (neither v1 `cpu` nor v2 with `cpu`)"
