"""Aware placement and work shares across unequal emulated hosts (Note [Live
shares], python/tfmpi/transparent/shares.py): from a pool of three hosts,
`--placement aware` leaves out the slowest, the probes give the slower of the
two chosen hosts a smaller first share, the measured speeds keep it smaller,
and the run still matches the 1-process run step by step. Needs root,
namespaces and cgroups (conftest.py); TensorFlow for training."""

import json
import os
import sys

import pytest

import harness

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TESTS, "python"))

import fidelity_check  # noqa: E402

# Shares follow the speeds the probes measure: run alone (scripts/test.sh).
pytestmark = pytest.mark.measures_speed


@pytest.fixture(scope="module")
def unequal_hosts():
    """Three emulated hosts of one slot: a whole core, 0.4 and a tenth of one. (A
    slower second host makes the run slower on a slow machine, not the test stronger:
    its start-up, TensorFlow's import and the first trace, takes most of the run.)"""
    reason = harness.unavailable_reason()
    if reason:
        pytest.skip(f"emulated cluster unavailable: {reason}")
    with harness.EmulatedCluster(hosts=3, cpu_quota=[1.0, 0.4, 0.1], slots=1) as cluster:
        yield cluster


def test_aware_run_gives_the_slow_host_less_and_matches_one_process(unequal_hosts, tmp_path):
    pytest.importorskip("tensorflow", reason="training needs TensorFlow")
    pytest.importorskip("sklearn", reason="the fidelity scripts train on scikit-learn's digits")
    args = ["train_cnn.py"]
    (tmp_path / "ref").mkdir()
    ref = fidelity_check.reference(args, {}, tmp_path / "ref")
    out = tmp_path / "run"
    out.mkdir()
    log = tmp_path / "shares.json"
    env = {"TFMPI_SHARES_LOG": str(log), "TFMPI_REBALANCE_STEPS": "6"}
    r = fidelity_check.launch(["tfmpirun", "-np", "2", "--placement", "aware",
                               *unequal_hosts.tfmpirun_args()], args, out, env, timeout=900)
    assert r.returncode == 0, r.stdout
    fidelity_check.assert_matches(ref, out, 2, r.stdout)
    chosen = [h.address for h in unequal_hosts.hosts[:2]]
    assert f"chosen: {chosen[0]}:1,{chosen[1]}:1 " in r.stdout, r.stdout  # host 2 left out

    shares = json.load(open(log))
    # The probes measured host 1 (0.4 of a core) slower than host 0: a smaller first share.
    assert shares["initial"][1] < 0.4, shares["initial"]
    history = shares["history"]
    # Host 1 computes at most 0.4 times as fast (less, counting its fixed costs): once
    # measured it is given well under half of each batch (equal speeds would keep 0.5), in
    # most windows. (Not in every one: a host that stalls for a moment gets less work in the
    # next window, by design, until the trial of that change undoes it.)
    kept = [h["fractions"][1] < 0.4 for h in history[1:]]  # after the first measurement
    assert kept and sum(kept) > len(kept) / 2, history
    # Over the run the slow rank computed well under half of the samples. (Runs saw stalls
    # of 5 and 20 s on the fast host; one gave the slow host 0.51 of the batch for a window.)
    done = [sum(h["samples"][r] for h in history) for r in (0, 1)]
    assert history and done[1] < 0.4 * sum(done), history


def test_per_rank_batches_dealt_by_speed_match_one_process_with_both(unequal_hosts, tmp_path):
    # Per-rank batch mode (Note [Batches by shares], python/tfmpi/transparent/per_rank.py):
    # each step's two batches of 96 are cut by the measured speeds, so the slow host
    # trains on fewer samples, and the run is one process's with batches of 192.
    pytest.importorskip("tensorflow", reason="training needs TensorFlow")
    pytest.importorskip("sklearn", reason="the fidelity scripts train on scikit-learn's digits")
    (tmp_path / "ref").mkdir()
    ref = fidelity_check.reference(["train_cnn.py", "192"], {}, tmp_path / "ref")
    out = tmp_path / "run"
    out.mkdir()
    log = tmp_path / "shares.json"
    env = {"TFMPI_SHARES_LOG": str(log), "TFMPI_REBALANCE_STEPS": "4"}
    r = fidelity_check.launch(["tfmpirun", "-np", "2", "--placement", "aware", "--batch-mode",
                               "per-rank", *unequal_hosts.tfmpirun_args()],
                              ["train_cnn.py", "96"], out, env, timeout=900)
    assert r.returncode == 0, r.stdout
    fidelity_check.assert_matches(ref, out, 2, r.stdout)
    shares = json.load(open(log))
    assert shares["initial"][1] < 0.4, shares["initial"]
    history = shares["history"]
    done = [sum(h["samples"][r] for h in history) for r in (0, 1)]
    assert history and done[1] < 0.4 * sum(done), history
