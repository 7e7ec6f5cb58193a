"""A host lost mid-run, across emulated hosts (issue: a job that lost a host hung and
ignored SIGTERM). A rank cut off by its link, frozen (SIGSTOP) or killed ends the job:
the surviving ranks stop with a message that names the lost rank and host, tfmpirun
exits non-zero, and nothing of the job is left on any host. SIGTERM or SIGINT to
tfmpirun ends the job within 10 s, while it trains and while it hangs on a lost host.
Note [Lost peers] (src/tfmpi/planning/liveness.h), Note [Losing a host] and Note
[Stopping the job] (src/tfmpi/launcher/)."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

import harness
import mpich

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "python", "allreduce_forever.py")
KERAS_SCRIPT = os.path.join(os.path.dirname(HERE), "python", "keras_forever.py")
PEER_TIMEOUT = 15  # TFMPI_PEER_TIMEOUT_SECONDS for these runs (default 45)
STOP_WITHIN = 10   # seconds from SIGTERM/SIGINT to tfmpirun's exit
MARGIN = 15        # seconds for mpirun and the daemons to wind down on a shared 2-core machine


@pytest.fixture
def cluster(request):
    """Two hosts of one slot each, or of `request.param` slots."""
    reason = harness.unavailable_reason()
    if reason:
        pytest.skip(f"emulated cluster unavailable: {reason}")
    if shutil.which("tfmpirun") is None:
        pytest.skip("tfmpirun is not on PATH (pip install . into the environment first)")
    with harness.EmulatedCluster(hosts=2, slots=getattr(request, "param", 1)) as c:
        yield c


# Two slots per host: a lost host takes a daemon with two ranks, and the
# surviving host's daemon has a rank next to the one that reports the loss.
TWO_SLOTS = pytest.mark.parametrize("cluster", [2], indirect=True, ids=["2-slot-hosts"])


class Job:
    """tfmpirun across the cluster (a rank per slot) running SCRIPT, its output in a file;
    with Open MPI, or with MPICH (tfmpi built against it, tests/cluster/mpich.py)."""

    def __init__(self, cluster, tmp_path, script=SCRIPT, mpi="openmpi"):
        self.np = sum(cluster.slots)
        self.hosts = [h.name for h in cluster.hosts]
        self.log = tmp_path / "output.txt"
        env = dict(os.environ, TFMPI_PEER_TIMEOUT_SECONDS=str(PEER_TIMEOUT),
                   TFMPI_ALL_RANKS_OUTPUT="1")
        if mpi == "mpich":
            launcher, *placement = mpich.launch_args(cluster)
            python = mpich.python()
        else:
            launcher, placement, python = "tfmpirun", cluster.tfmpirun_args(), sys.executable
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                [launcher, "-np", str(self.np), *placement, python, script],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.ranks = self._wait_for_steps()

    def output(self):
        return self.log.read_text(errors="replace")

    def _wait_for_steps(self, timeout=180):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            text = self.output()
            # Lines of different ranks can run into each other (MPICH forwards output
            # as it comes): the host is one of the cluster's names.
            hosts = "|".join(re.escape(h) for h in self.hosts)
            ranks = {int(r): (int(pid), host) for r, pid, host in
                     re.findall(rf"rank (\d+) pid (\d+) host ({hosts})", text)}
            if len(ranks) == self.np and re.search(r"rank 0 step [1-9]", text):
                return ranks
            time.sleep(0.2)
        self.kill()
        raise AssertionError(f"the job did not start training:\n{self.output()}")

    def wait(self, timeout):
        """Seconds until tfmpirun exited; fails (and ends the job) after `timeout`."""
        start = time.monotonic()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"tfmpirun still ran {timeout} s later:\n{self.output()}")
        return time.monotonic() - start

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)


def assert_nothing_left(cluster, job, timeout):
    """No process in any host's namespace or cgroup (daemons, ranks), no rank anywhere,
    nothing in tfmpirun's session (mpirun)."""
    deadline = time.monotonic() + timeout
    while True:
        left = {h.name: sorted(cluster.pids(h)) for h in cluster.hosts}
        left = {name: pids for name, pids in left.items() if pids}
        ranks = [pid for pid, _ in job.ranks.values() if os.path.exists(f"/proc/{pid}")]
        session = [p for p in os.listdir("/proc") if p.isdigit() and _session(p) == job.proc.pid]
        if not (left or ranks or session):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"left behind {timeout} s later: hosts {left}, ranks {ranks}, "
                                 f"tfmpirun's session {session}\n{job.output()}")
        time.sleep(0.2)


def _session(pid):
    try:
        return os.getsid(int(pid))
    except OSError:
        return None


def assert_names_lost_rank(job, rank, host):
    text = job.output()
    assert re.search(rf"rank {rank} on host {re.escape(host)}", text), text


def first_rank_on(cluster, host):
    return sum(cluster.slots[:host])  # slots fill the first host first


@TWO_SLOTS
def test_link_down_ends_the_job_naming_the_lost_host(cluster, tmp_path):
    job = Job(cluster, tmp_path)
    cluster.link_down(1)
    took = job.wait(PEER_TIMEOUT + MARGIN)
    assert job.proc.returncode != 0, job.output()
    assert took < PEER_TIMEOUT + MARGIN
    # Rank 0 watches the last rank, the last rank of host 0 the first of host 1.
    assert_names_lost_rank(job, job.np - 1, cluster.hosts[1].name)
    assert_nothing_left(cluster, job, MARGIN)


def test_link_down_ends_keras_training(cluster, tmp_path):
    pytest.importorskip("keras", reason="Keras training needs keras and TensorFlow")
    job = Job(cluster, tmp_path, KERAS_SCRIPT)
    cluster.link_down(1)
    job.wait(PEER_TIMEOUT + MARGIN)
    assert job.proc.returncode != 0, job.output()
    assert_names_lost_rank(job, 1, cluster.hosts[1].name)
    assert_nothing_left(cluster, job, MARGIN)


def test_frozen_rank_ends_keras_training_with_an_error(cluster, tmp_path):
    pytest.importorskip("keras", reason="Keras training needs keras and TensorFlow")
    job = Job(cluster, tmp_path, KERAS_SCRIPT)
    os.kill(job.ranks[1][0], signal.SIGSTOP)
    job.wait(PEER_TIMEOUT + MARGIN)
    assert job.proc.returncode != 0, job.output()
    assert "lost contact with rank 1 on host " + cluster.hosts[1].name in job.output()
    assert_nothing_left(cluster, job, MARGIN)


@TWO_SLOTS
@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_frozen_rank_ends_the_job_naming_it(cluster, mpi, tmp_path):
    if mpi == "mpich":
        mpich.require()
    job = Job(cluster, tmp_path, mpi=mpi)
    frozen = first_rank_on(cluster, 1)
    os.kill(job.ranks[frozen][0], signal.SIGSTOP)
    took = job.wait(PEER_TIMEOUT + MARGIN)
    assert job.proc.returncode != 0, job.output()
    assert f"lost contact with rank {frozen} on host {cluster.hosts[1].name}" in job.output()
    assert took >= PEER_TIMEOUT / 2, "a frozen rank must not be given up before its time"
    assert_nothing_left(cluster, job, MARGIN)


def test_killed_rank_ends_the_job_naming_it(cluster, tmp_path):
    job = Job(cluster, tmp_path)
    os.kill(job.ranks[1][0], signal.SIGKILL)
    job.wait(MARGIN)
    assert job.proc.returncode != 0, job.output()
    # Open MPI reports it: "process rank 1 with PID ... on node <address> exited on signal 9".
    assert re.search(r"rank 1 .*on node \S+ exited on signal 9", job.output()), job.output()
    assert_nothing_left(cluster, job, MARGIN)


# SIGTERM while training, SIGINT while hung (tests/python/test_launcher.py sends
# SIGTERM, SIGINT and SIGHUP to a job training on one host).
@pytest.mark.parametrize("sig", [signal.SIGTERM], ids=["SIGTERM"])
def test_signal_ends_a_training_job_within_10s(cluster, tmp_path, sig):
    job = Job(cluster, tmp_path)
    os.kill(job.proc.pid, sig)
    took = job.wait(STOP_WITHIN + 5)
    assert took < STOP_WITHIN, job.output()
    assert job.proc.returncode != 0, job.output()
    assert_nothing_left(cluster, job, STOP_WITHIN - took + 2)


@pytest.mark.parametrize("sig", [signal.SIGINT], ids=["SIGINT"])
def test_signal_ends_a_job_hung_on_a_lost_host_within_10s(cluster, tmp_path, sig):
    job = Job(cluster, tmp_path)
    cluster.link_down(1)
    time.sleep(3)  # the ranks now wait for one another inside MPI
    assert job.proc.poll() is None
    os.kill(job.proc.pid, sig)
    took = job.wait(STOP_WITHIN + 5)
    assert took < STOP_WITHIN, job.output()
    assert job.proc.returncode != 0, job.output()
    # The lost host's daemon cannot hear mpirun go: it gives up through TCP keepalive
    # (0.6 x the peer timeout after the loss) and ends its rank.
    assert_nothing_left(cluster, job, 0.6 * PEER_TIMEOUT + MARGIN)
