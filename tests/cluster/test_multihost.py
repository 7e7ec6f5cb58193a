"""tfmpirun across emulated hosts (harness.py): ranks on several hosts, each
started by a remote shell with a clean environment, as over ssh. Local rank
and size are per host; the launching environment reaches every rank but its
host-specific variables; fidelity kinds match the 1-process run across hosts.
Needs root, namespaces and cgroups (see conftest.py); TensorFlow for training."""

import json
import os
import sys

import pytest

import harness
import mpich

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TESTS, "python"))

import fidelity_check  # noqa: E402
from mpirun_util import run  # noqa: E402

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}


@pytest.fixture(scope="module")
def two_hosts():
    """Two emulated hosts with two slots each (four ranks)."""
    reason = harness.unavailable_reason()
    if reason:
        pytest.skip(f"emulated cluster unavailable: {reason}")
    with harness.EmulatedCluster(hosts=2, slots=2) as cluster:
        yield cluster


WHERE = """
import json, os, socket, sys
import tfmpi
tfmpi.init()
seen = {"rank": tfmpi.rank(), "size": tfmpi.size(), "local_rank": tfmpi.local_rank(),
        "local_size": tfmpi.local_size(), "host": socket.gethostname(),
        "vars": {k: os.environ.get(k) for k in ("MY_DATA_DIR", "TF_USE_LEGACY_KERAS",
                                                 "TF_CPP_MIN_LOG_LEVEL", "HOSTNAME",
                                                 "CUDA_VISIBLE_DEVICES")},
        "cwd": os.getcwd()}
from tfmpi.transparent import state  # transparent mode (tfmpirun) resolves the work shares
seen["shares"] = getattr(state.options, "shares", None)
with open(os.path.join(sys.argv[1], f"rank-{tfmpi.rank()}.json"), "w") as f:
    json.dump(seen, f)
"""


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_ranks_know_their_host_and_get_the_launching_environment(two_hosts, mpi, tmp_path):
    """Open MPI, and MPICH's Hydra (tfmpi built against MPICH, an MPICH host file):
    Hydra would pass every variable, those of the launching host too, unless tfmpirun
    lists them (Note [Forwarding the environment])."""
    if mpi == "mpich":
        mpich.require()
        launch = [*mpich.launch_args(two_hosts), mpich.python()]
    else:
        launch = ["tfmpirun", *two_hosts.tfmpirun_args(), sys.executable]
    env = {"MY_DATA_DIR": "/data/set-1", "TF_USE_LEGACY_KERAS": "0", "TF_CPP_MIN_LOG_LEVEL": "3",
           "HOSTNAME": "launching-host", "CUDA_VISIBLE_DEVICES": "3"}
    r = run([launch[0], "-np", "4", *launch[1:], "-c", WHERE, str(tmp_path)], 120, env=env)
    assert r.returncode == 0, r.stdout
    seen = [json.load(open(tmp_path / f"rank-{i}.json")) for i in range(4)]
    hosts = [h.name for h in two_hosts.hosts]
    for i, s in enumerate(seen):
        assert (s["rank"], s["size"], s["local_rank"], s["local_size"]) == (i, 4, i % 2, 2), s
        assert s["host"] == hosts[i // 2], (s, hosts)  # slots fill the first host first
        # these describe the launching host: not forwarded
        assert s["vars"].pop("HOSTNAME") != "launching-host", s
        assert s["vars"].pop("CUDA_VISIBLE_DEVICES") is None, s
        assert s["vars"] == {"MY_DATA_DIR": "/data/set-1", "TF_USE_LEGACY_KERAS": "0",
                             "TF_CPP_MIN_LOG_LEVEL": "3"}, s
        assert s["cwd"] == os.getcwd(), s  # ranks start where tfmpirun ran, as mpirun does
        if mpi == "openmpi":  # across hosts TFMPI_SHARES=auto is adaptive (Note [Shares by default])
            assert s["shares"] == "adaptive", s


# Fidelity kinds across hosts: (script and arguments, environment). The kinds
# whose behaviour depends on hosts: plain fit, files written and read back
# without a shared filesystem, the environment choosing tf_keras. Every kind
# runs on one host in tests/python/test_fidelity.py.
KINDS = {
    "fit": (["train_fit.py"], {}),
    "save_then_load": (["train_save_load.py"], {}),
    "tf_keras_fit": (["train_fit.py"], {"TF_USE_LEGACY_KERAS": "1"}),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_fidelity_across_hosts(two_hosts, kind, tmp_path):
    pytest.importorskip("tensorflow", reason="training needs TensorFlow")
    pytest.importorskip("sklearn", reason="the fidelity scripts train on scikit-learn's digits")
    args, env = KINDS[kind]
    if "TF_USE_LEGACY_KERAS" in env:
        pytest.importorskip("tf_keras", reason="tf_keras is not installed (scripts/setup.sh installs it)")
    (tmp_path / "ref").mkdir()
    ref = fidelity_check.reference(args, env, tmp_path / "ref")
    out = tmp_path / "run"
    out.mkdir()
    # The environment selecting tf_keras reaches the remote ranks only if tfmpirun forwards it.
    r = fidelity_check.launch(["tfmpirun", "-np", "4", *two_hosts.tfmpirun_args()], args, out,
                              env, timeout=600)
    assert r.returncode == 0, r.stdout
    fidelity_check.assert_matches(ref, out, 4, r.stdout)


POOLS = """
import json, os, sys
view = {k: os.environ.get(k) for k in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")}
with open(os.path.join(sys.argv[1], f"pools-{os.getpid()}.json"), "w") as f:
    json.dump(view, f)
"""


def test_a_rank_keeps_its_pools_to_its_hosts_cpu_quota(tmp_path):
    """Note [Threads per rank]: on a host whose cgroup quota (one core) is below the CPUs it
    shows, a rank alone on the host sizes TensorFlow's pools to the quota, at 2 ranks across
    two hosts and as the one rank of tfmpirun -np 1. The agent shows each host its own
    cgroup, as a container or batch job sees its limits."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs: a quota of one core must be below the CPUs a host shows")
    reason = harness.unavailable_reason()
    if reason:
        pytest.skip(f"emulated cluster unavailable: {reason}")
    with harness.EmulatedCluster(hosts=2, cpu_quota=1.0) as cluster:
        for np_ in (2, 1):
            out = tmp_path / f"np{np_}"
            out.mkdir()
            r = run(["tfmpirun", "-np", str(np_), *cluster.tfmpirun_args(), sys.executable,
                     "-c", POOLS, str(out)], 120, env=QUIET)
            assert r.returncode == 0, r.stdout
            views = [json.load(open(p)) for p in sorted(out.glob("pools-*.json"))]
            one_core = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}
            assert views == [one_core] * np_, (views, r.stdout)
            assert "cgroup quota 1, 1 rank on this host" in r.stdout, r.stdout
