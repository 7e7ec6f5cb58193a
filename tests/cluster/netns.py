"""The emulated hosts' network: one network namespace per host on a bridge.

Names for a run RUN (at most 10 characters, so every interface name fits in 15):
  RUN-br      the bridge, in the root namespace, holding the subnet's .1 address
              (mpirun runs in the root namespace and its daemons call back to it there)
  RUN-hI      host I's namespace, and the root end of its veth pair (on the bridge)
  eth0        the namespace end of that pair, with address .(10+I) of the subnet
The subnet is the first free 198.18.N.0/24 (198.18.0.0/15 is reserved for network
benchmarks); a lock file makes two runs starting together pick different ones.
Bandwidth limits are tbf qdiscs on both ends of a host's veth pair (netem, and so delay,
is not available on every kernel, so nothing here uses it).
"""

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import tempfile

SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def tool(name):
    """Absolute path of an administration command, also when /sbin is not on PATH."""
    return shutil.which(name, path=SBIN_PATH)


class NetworkError(RuntimeError):
    pass


def run(argv, check=True, timeout=20):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise NetworkError(f"`{' '.join(argv)}` failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def ip(*args, check=True):
    return run([tool("ip"), *args], check=check)


def namespaces():
    out = ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def links():
    """Interface names in the root namespace."""
    out = ip("-o", "link", "show", check=False).stdout
    return [m.group(1) for m in re.finditer(r"^\d+: ([^:@\s]+)", out, re.M)]


def netns_pids(ns):
    out = ip("netns", "pids", ns, check=False).stdout
    return {int(p) for p in out.split() if p.isdigit()}


@contextlib.contextmanager
def _subnet_lock():
    folder = "/run/lock" if os.path.isdir("/run/lock") else tempfile.gettempdir()
    with open(os.path.join(folder, "tfmpi-emulated-cluster.lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _used_third_octets():
    text = ip("-4", "-o", "addr", "show", check=False).stdout
    text += ip("-4", "route", "show", "table", "all", check=False).stdout
    return {int(n) for n in re.findall(r"\b198\.18\.(\d+)\.", text)}


def tbf_args(mbit):
    """tc arguments of a tbf qdisc limiting egress to `mbit` megabits per second."""
    burst = max(16 * 1024, int(mbit * 1e6 / 8 / 250))  # a 4 ms bucket, at least 16 KiB
    return ["tbf", "rate", f"{mbit}mbit", "burst", str(burst), "latency", "100ms"]


class Network:
    """Creates and removes the bridge, namespaces and veth pairs of one run."""

    def __init__(self, run_name, count):
        if len(run_name) > 10:
            raise ValueError(f"run name {run_name!r} is longer than 10 characters")
        self.run = run_name
        self.count = count
        self.bridge = f"{run_name}-br"
        self.namespaces = [f"{run_name}-h{i}" for i in range(count)]
        self.veths = list(self.namespaces)
        self.subnet = None  # e.g. "198.18.0.0/24"
        self.gateway = None  # the bridge's address, e.g. "198.18.0.1"
        self.addresses = []

    def create(self):
        with _subnet_lock():
            used = _used_third_octets()
            free = [n for n in range(256) if n not in used]
            if not free:
                raise NetworkError("no free 198.18.N.0/24 subnet left")
            prefix = f"198.18.{free[0]}"
            ip("link", "add", self.bridge, "type", "bridge")
            ip("addr", "add", f"{prefix}.1/24", "dev", self.bridge)
        self.subnet = f"{prefix}.0/24"
        self.gateway = f"{prefix}.1"
        self.addresses = [f"{prefix}.{10 + i}" for i in range(self.count)]
        ip("link", "set", self.bridge, "up")
        for i, (ns, veth, addr) in enumerate(zip(self.namespaces, self.veths, self.addresses)):
            peer = f"{self.run}-p{i}"
            ip("netns", "add", ns)
            ip("link", "add", veth, "type", "veth", "peer", "name", peer)
            ip("link", "set", peer, "netns", ns)
            ip("-n", ns, "link", "set", peer, "name", "eth0")
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")
            ip("link", "set", veth, "master", self.bridge)
            ip("link", "set", veth, "up")

    def set_bandwidth(self, i, mbit):
        """Limit host i's link to `mbit` in each direction (None: unlimited)."""
        tc = tool("tc")
        if tc is None:
            raise NetworkError("no `tc` command (iproute2): cannot limit bandwidth")
        for prefix, dev in (([tc, "-n", self.namespaces[i]], "eth0"), ([tc], self.veths[i])):
            if mbit is None:
                run(prefix + ["qdisc", "del", "dev", dev, "root"], check=False)
            else:
                run(prefix + ["qdisc", "replace", "dev", dev, "root"] + tbf_args(mbit))

    def set_link(self, i, up):
        ip("link", "set", self.veths[i], "up" if up else "down")


def destroy(run_name):
    """Remove every namespace and link of a run (idempotent). Returns what is left.

    The processes in the namespaces must be ended first: deleting a namespace does not
    end them."""
    pattern = re.compile(re.escape(run_name) + r"-(h|p)\d+|" + re.escape(run_name) + "-br")
    for ns in namespaces():
        if pattern.fullmatch(ns):
            ip("netns", "del", ns, check=False)
    for link in links():
        if pattern.fullmatch(link):
            ip("link", "del", link, check=False)
    return ([ns for ns in namespaces() if pattern.fullmatch(ns)]
            + [link for link in links() if pattern.fullmatch(link)])
