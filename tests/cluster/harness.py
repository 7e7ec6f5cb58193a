"""Emulated cluster: K test hosts on one machine, with real processes and Open MPI.

Each host is a network namespace on a bridge (netns.py) with its own CPU cgroup
(cpu_cgroups.py); Open MPI reaches the hosts through an rsh agent (rsh_agent.py) that
gives every remote command a clean environment, as ssh does. Everything is removed on
exit, on an exception, on SIGINT/SIGTERM and at interpreter exit (teardown.py).

    with EmulatedCluster(hosts=2, cpu_quota=[1.0, 0.5]) as cluster:
        subprocess.run(["mpirun", "-np", "2", *cluster.mpirun_args(np=2), "./a.out"], timeout=60)
        subprocess.run(["tfmpirun", "-np", "2", *cluster.tfmpirun_args(), "python3", "t.py"])

CLI:  python tests/cluster/harness.py up --hosts 3 --quota 1,0.5,0.25 [--bandwidth 100]
      python tests/cluster/harness.py cleanup [--prefix tfmc] [--force] [--dry-run]
"""

import argparse
import atexit
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

import availability
import cpu_cgroups
import netns
import rsh_agent
import teardown
from availability import bandwidth_unavailable_reason, unavailable_reason  # noqa: F401

DEFAULT_PREFIX = "tfmc"
BUSY_LOOP = "while :; do :; done"


class ClusterUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class Host:
    index: int
    name: str  # also its namespace, host name and root-side veth
    address: str
    netns: str
    veth: str
    cgroup_dirs: tuple


def _per_host(value, count, what):
    values = list(value) if isinstance(value, (list, tuple)) else [value] * count
    if len(values) != count:
        raise ValueError(f"{what}: {len(values)} values for {count} hosts")
    return values


class EmulatedCluster:
    """K emulated hosts; a context manager (or call start() and close())."""

    def __init__(self, hosts=2, cpu_quota=None, bandwidth_mbit=None, slots=1,
                 name_prefix=DEFAULT_PREFIX, path=None, hostnames=True):
        if not re.fullmatch(r"[a-z][a-z0-9]{0,3}", name_prefix):
            raise ValueError(f"name_prefix {name_prefix!r}: 1-4 lower-case letters or digits, "
                             "so that interface names fit in 15 characters")
        self.count = hosts
        self.cpu_quota = _per_host(cpu_quota, hosts, "cpu_quota")
        self.bandwidth_mbit = _per_host(bandwidth_mbit, hosts, "bandwidth_mbit")
        self.slots = _per_host(slots, hosts, "slots")
        self.path = path if path is not None else os.environ.get("PATH", os.defpath)
        self.hostnames = hostnames
        self.run_name = name_prefix + secrets.token_hex(3)
        self.hosts = []  # Host objects, once started
        self.hostfile = self.mpich_hostfile = self.agent = self.subnet = self.temp_dir = None
        self._groups, self._loads, self._previous_handlers = [], {}, {}
        self._pending_signal = None
        self._network = None
        self._open = False

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def is_up(self):
        """Started and not yet closed."""
        return self._open

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def start(self):
        if self._open or self.hosts:
            raise RuntimeError(f"emulated cluster {self.run_name} was already started")
        reason = unavailable_reason()
        if reason:
            raise ClusterUnavailable(reason)
        if any(b is not None for b in self.bandwidth_mbit) and bandwidth_unavailable_reason():
            raise ClusterUnavailable(bandwidth_unavailable_reason())
        self._open = True
        atexit.register(self.close)
        self._install_signal_handlers()
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def _build(self):
        prefix = self.run_name[:-6]
        while self.run_name in teardown.find_runs(prefix):  # teardown must own all it finds
            self.run_name = prefix + secrets.token_hex(3)
        self.temp_dir = tempfile.mkdtemp(prefix=self.run_name + "-")
        teardown.write_owner(self.temp_dir)
        self._network = netns.Network(self.run_name, self.count)
        self._network.create()
        self.subnet = self._network.subnet
        controller = cpu_cgroups.detect()[0]
        names = self._network.namespaces
        groups = controller.create(self.run_name, names)
        self._groups = [groups[n] for n in names]
        for i, name in enumerate(names):
            self._groups[i].set_quota(self.cpu_quota[i])
            if self.bandwidth_mbit[i] is not None:
                self._network.set_bandwidth(i, self.bandwidth_mbit[i])
            self.hosts.append(Host(i, name, self._network.addresses[i], name,
                                   self._network.veths[i], tuple(self._groups[i].dirs)))
        agent_hosts = [rsh_agent.AgentHost((h.address, h.name), h.netns,
                                           tuple(self._groups[h.index].procs_files),
                                           h.name if self.hostnames else "")
                       for h in self.hosts]
        self.agent = rsh_agent.write_agent(
            os.path.join(self.temp_dir, "rsh-agent"), agent_hosts, availability.tools(),
            rsh_agent.clean_environment(self.path), run_name=self.run_name,
            cgroup_mount=controller.mount_script())
        self.hostfile = rsh_agent.write_hostfile(
            os.path.join(self.temp_dir, "hostfile"), [h.address for h in self.hosts], self.slots)
        self.mpich_hostfile = rsh_agent.write_hostfile(
            os.path.join(self.temp_dir, "hostfile.mpich"), [h.address for h in self.hosts],
            self.slots, mpich=True)

    def close(self):
        """Remove everything the run created (idempotent). Raises if something is left.

        A SIGINT or SIGTERM that arrives meanwhile waits until the cleanup is done, then
        goes to the handler that was there before the cluster."""
        if not self._open:
            return
        self._open = False
        loads = [p for procs in self._loads.values() for p in procs]
        self._loads = {}
        try:
            for proc in loads:
                proc.kill()
            problems = teardown.teardown(self.run_name)
            for proc in loads:
                proc.wait(timeout=10)
        finally:
            atexit.unregister(self.close)
            previous = self._restore_signal_handlers()
            pending, self._pending_signal = self._pending_signal, None
            if pending is not None:
                _deliver(pending, None, previous.get(pending, signal.SIG_DFL))
        if problems:
            raise RuntimeError(f"emulated cluster {self.run_name}: could not remove "
                               f"{', '.join(problems)}; run `harness.py cleanup --force`")

    def _install_signal_handlers(self):
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous_handlers[sig] = signal.getsignal(sig)
            signal.signal(sig, self._on_signal)

    def _restore_signal_handlers(self):
        previous, self._previous_handlers = self._previous_handlers, {}
        for sig, handler in previous.items():
            if signal.getsignal(sig) == self._on_signal:
                signal.signal(sig, handler)
        return previous

    def _on_signal(self, signum, frame):
        self._pending_signal = signum  # close() delivers it once the cleanup is done
        self.close()  # returns at once when a close() is already running

    # -- launching -----------------------------------------------------------------------

    def mpi_flags(self):
        """Open MPI flags, placement excepted (what `tfmpirun --mpi-args` takes)."""
        return ["--mca", "plm_rsh_agent", self.agent,
                # Daemons start other daemons from inside a namespace otherwise, where
                # the agent cannot reach the cgroup hierarchy.
                "--mca", "plm_rsh_no_tree_spawn", "1",
                "--mca", "btl", "tcp,self",
                "--mca", "btl_tcp_if_include", self.subnet,
                "--mca", "oob_tcp_if_include", self.subnet,
                # Every host sees all of the machine's cores: binding would put the
                # first rank of every host on the same core.
                "--bind-to", "none"]

    def mpirun_args(self, np=None):
        """All mpirun flags: --hostfile, mpi_flags(), root and oversubscription flags."""
        args = ["--hostfile", self.hostfile] + self.mpi_flags()
        if os.geteuid() == 0:
            args.append("--allow-run-as-root")
        if np is not None and np > sum(self.slots):
            args.append("--oversubscribe")
        return args

    def mpich_flags(self):
        """MPICH (Hydra) flags, placement excepted: the agent as its ssh, and the
        bridge's address for the proxies to call back (the machine's host name
        resolves to an address the hosts cannot reach). The ranks' messages go
        through UCX's shared memory (Debian's MPICH runs over UCX), which reaches
        across the hosts, as they share the machine: only Hydra's own traffic
        crosses the emulated network, and a link that is down does not cut the
        ranks apart. Said explicitly (UCX_TLS), as on UCX's TCP MPICH's
        MPI_Finalize hung here (README)."""
        return ["-launcher", "ssh", "-launcher-exec", self.agent,
                "-localhost", self._network.gateway, "-genv", "UCX_TLS", "sm,self"]

    def tfmpirun_args(self, extra_mpi_args=(), mpich=False):
        """tfmpirun placement flags: --hostfile FILE --mpi-args "FLAGS" (for
        Open MPI, or for MPICH: then also pass `--mpirun mpiexec.mpich`, and run
        the tfmpirun and Python of tfmpi built against MPICH, mpich.py)."""
        hostfile, flags = ((self.mpich_hostfile, self.mpich_flags()) if mpich
                           else (self.hostfile, self.mpi_flags()))
        return ["--hostfile", hostfile, "--mpi-args", shlex.join(flags + list(extra_mpi_args))]

    def host(self, host):
        """A Host from an index, an address, a name or a Host."""
        if isinstance(host, Host):
            return host
        for h in self.hosts:
            if host in (h.index, h.address, h.name):
                return h
        raise KeyError(f"no host {host!r} in emulated cluster {self.run_name}")

    def command(self, host, shell_command):
        """argv that runs a shell command on a host, as ssh would (clean environment)."""
        return [self.agent, self.host(host).address, shell_command]

    def popen(self, host, shell_command, **kwargs):
        return subprocess.Popen(self.command(host, shell_command), **kwargs)

    def run(self, host, shell_command, timeout, **kwargs):
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run(self.command(host, shell_command), timeout=timeout, **kwargs)

    # -- changing hosts mid-run ------------------------------------------------------------

    def start_load(self, host, procs=1):
        """Start `procs` busy loops in the host's namespace and cgroup; returns their pids."""
        h = self.host(host)
        started = [self.popen(h, BUSY_LOOP, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              start_new_session=True) for _ in range(procs)]
        self._loads.setdefault(h.index, []).extend(started)
        pids = {p.pid for p in started}
        deadline = time.monotonic() + 30
        # Placed once the agent has entered the cgroup and then the namespace.
        while not pids <= netns.netns_pids(h.netns) & self._groups[h.index].pids():
            if time.monotonic() > deadline or any(p.poll() is not None for p in started):
                raise RuntimeError(f"busy loops {sorted(pids)} did not start on {h.name}")
            time.sleep(0.02)
        return [p.pid for p in started]

    def stop_load(self, host):
        for proc in self._loads.pop(self.host(host).index, []):
            proc.kill()
            proc.wait(timeout=10)

    def set_cpu_quota(self, host, fraction):
        self._groups[self.host(host).index].set_quota(fraction)

    def set_bandwidth(self, host, mbit):
        self._network.set_bandwidth(self.host(host).index, mbit)

    def link_down(self, host):
        self._network.set_link(self.host(host).index, up=False)

    def link_up(self, host):
        self._network.set_link(self.host(host).index, up=True)

    def cpu_seconds(self, host):
        """CPU time used in the host's cgroup since the cluster started."""
        return self._groups[self.host(host).index].usage_seconds()

    def pids(self, host):
        """Processes in the host's namespace or cgroup."""
        h = self.host(host)
        return netns.netns_pids(h.netns) | self._groups[h.index].pids()


def _deliver(signum, frame, handler):
    """Hand a signal to the handler that was installed before the cluster's."""
    if callable(handler):
        handler(signum, frame)
    elif handler == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _floats(text):
    return [None if v in ("", "none", "max") else float(v) for v in text.split(",")]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="create a cluster, print how to use it, wait for Ctrl-C")
    up.add_argument("--hosts", type=int, default=2)
    up.add_argument("--quota", type=_floats, help="per-host fraction of a core, e.g. 1,0.5,none")
    up.add_argument("--bandwidth", type=_floats, help="Mbit/s, one value or one per host")
    up.add_argument("--slots", type=int, default=1)
    up.add_argument("--prefix", default=DEFAULT_PREFIX)
    clean = sub.add_parser("cleanup", help="remove what crashed runs left behind")
    clean.add_argument("--prefix", default=DEFAULT_PREFIX)
    clean.add_argument("--force", action="store_true", help="also runs whose owner is alive")
    clean.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)

    if args.action == "cleanup":
        status = 0
        for run in teardown.find_runs(args.prefix):
            if teardown.owner_alive(run) and not args.force:
                print(f"{run}: its owner is still running (skipped; --force removes it)")
                continue
            print(f"{run}: {teardown.leftovers(run)}")
            if not args.dry_run:
                problems = teardown.teardown(run)
                print(f"{run}: " + (f"could not remove {problems}" if problems else "removed"))
                status |= bool(problems)
        return status

    def one_or_each(values):
        return values[0] if values and len(values) == 1 else values

    cluster = EmulatedCluster(hosts=args.hosts, cpu_quota=one_or_each(args.quota),
                              bandwidth_mbit=one_or_each(args.bandwidth), slots=args.slots,
                              name_prefix=args.prefix)
    try:
        cluster.start()
        _print_usage(cluster)
        while cluster.is_up:  # a signal whose previous handler ignores it only cleans up
            signal.pause()
    except ClusterUnavailable as e:
        print(f"cannot build an emulated cluster here: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: the way to end `up`
        pass
    finally:
        cluster.close()
    return 0


def _print_usage(cluster):
    for h in cluster.hosts:
        print(f"host {h.index}: {h.address} netns {h.netns} quota {cluster.cpu_quota[h.index]} "
              f"bandwidth {cluster.bandwidth_mbit[h.index]} cgroup {' '.join(h.cgroup_dirs)}")
    print(f"hostfile: {cluster.hostfile}")
    print(f"mpirun -np {sum(cluster.slots)} {shlex.join(cluster.mpirun_args())} COMMAND")
    print(f"tfmpirun -np {sum(cluster.slots)} {shlex.join(cluster.tfmpirun_args())} COMMAND")
    print(f"MPICH (tfmpi built by scripts/mpich.sh): build/mpich-venv/bin/tfmpirun --mpirun "
          f"mpiexec.mpich -np {sum(cluster.slots)} {shlex.join(cluster.tfmpirun_args(mpich=True))} "
          "build/mpich-venv/bin/python SCRIPT")
    print(f"shell on host 0: {shlex.join(cluster.command(0, 'exec sh -i'))}")
    print("Ctrl-C removes the cluster.", flush=True)


if __name__ == "__main__":
    sys.exit(main())
