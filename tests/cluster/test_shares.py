"""Work shares across unequal emulated hosts (Note [Live shares],
python/tfmpi/transparent/shares.py): a host held to a fraction of a core is
measured as slower and given a smaller slice of every batch, and the run still
matches the 1-process run step by step. Needs root, namespaces and cgroups
(conftest.py); TensorFlow for training."""

import json
import os
import sys

import pytest

import harness

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TESTS, "python"))

import fidelity_check  # noqa: E402


@pytest.fixture(scope="module")
def unequal_hosts():
    """Two emulated hosts of one slot: a whole core, and a quarter of one."""
    reason = harness.unavailable_reason()
    if reason:
        pytest.skip(f"emulated cluster unavailable: {reason}")
    with harness.EmulatedCluster(hosts=2, cpu_quota=[1.0, 0.25], slots=1) as cluster:
        yield cluster


def test_slow_host_gets_a_smaller_slice_and_the_run_matches_one_process(unequal_hosts, tmp_path):
    pytest.importorskip("tensorflow", reason="training needs TensorFlow")
    pytest.importorskip("sklearn", reason="the fidelity scripts train on scikit-learn's digits")
    args = ["train_cnn.py"]
    (tmp_path / "ref").mkdir()
    ref = fidelity_check.reference(args, {}, tmp_path / "ref")
    out = tmp_path / "run"
    out.mkdir()
    log = tmp_path / "shares.json"
    env = {"TFMPI_SHARES_LOG": str(log), "TFMPI_REBALANCE_STEPS": "6"}
    r = fidelity_check.launch(["tfmpirun", "-np", "2", *unequal_hosts.tfmpirun_args()], args, out,
                              env, timeout=600)
    assert r.returncode == 0, r.stdout
    fidelity_check.assert_matches(ref, out, 2, r.stdout)

    shares = json.load(open(log))
    assert shares["initial"] == [0.5, 0.5]
    history = shares["history"]
    assert any(h["changed"] for h in history), history
    # The quarter-core host computes about a quarter as fast: once measured it
    # is given well under half of each batch (equal speeds would keep 0.5).
    final = history[-1]["fractions"]
    assert final[1] < 0.4, history
    # Every rebalance after the first saw the slow rank compute fewer samples.
    late = [h["samples"] for h in history[1:]]
    assert late and all(s[1] < s[0] for s in late), history
