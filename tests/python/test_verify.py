"""The proof kit: `tfmpirun --verify` runs a script as one process and at N
ranks and compares them step by step (Note [Proof runs],
python/tfmpi/transparent/verify.py).

- A Keras fit with BatchNormalization and Dropout: every step matches, the
  verdict says so, exit status 0; with per-slice BatchNormalization
  (--no-sync-batchnorm, not the 1-process run) the run departs at step 1,
  names the BatchNormalization layer as the first layer whose output
  departs, and ends with exit status 3.
- A custom loop in TensorFlow alone (tf.Module, tapes, updates by hand):
  every step compared and matching.
- More steps asked than the script trains: compared over those it trains,
  and said.
"""

import os
import re
import sys

import pytest

from mpirun_util import HERE, run

pytest.importorskip("tensorflow", reason="the proof kit runs TensorFlow scripts")

BN_SCRIPT = os.path.join(HERE, "scripts", "bn_classifier.py")
TF_MODULE = os.path.join(HERE, "fidelity", "train_tf_module.py")
QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}


def _verify(args, command, timeout=600):
    return run(["tfmpirun", "--verify", *args, sys.executable, *command], timeout=timeout,
               env=QUIET)


def _steps(out):
    return re.findall(r"^tfmpi verify: step (\d+): loss .* relative\); weights ([0-9.e+-]+)",
                      out, re.M)


@pytest.mark.quick  # the quick tier's real training run, 1 process against 2 ranks
def test_a_fit_that_matches_and_one_that_departs():
    r = _verify(["--verify-steps", "6", "-np", "2"], [BN_SCRIPT, "1"])
    assert r.returncode == 0, r.stdout
    steps = _steps(r.stdout)
    assert [int(s) for s, _ in steps] == list(range(1, 7)), r.stdout
    assert all(float(w) <= 1e-4 for _, w in steps), r.stdout
    assert "6 steps at 2 ranks: the same training as the 1-process run" in r.stdout, r.stdout

    r = _verify(["--verify-steps", "6", "-np", "2", "--no-sync-batchnorm"], [BN_SCRIPT, "1"])
    assert r.returncode == 3, r.stdout
    assert re.search(r"departs from the 1-process run at step 1: the first layer whose output "
                     r"departs is '[^']*batch_normalization[^']*'", r.stdout), r.stdout
    assert "the run at 2 ranks departs from the 1-process run" in r.stdout
    # per-slice moments, but moving statistics that agree (Note [Moving statistics that agree])
    assert "differ from rank 0's" not in r.stdout, r.stdout


def test_a_custom_loop_in_tensorflow_alone(tmp_path):
    out = tmp_path / "records"
    out.mkdir()
    r = _verify(["--verify-steps", "12", "-np", "3"], [TF_MODULE, str(out)])
    assert r.returncode == 0, r.stdout
    assert [int(s) for s, _ in _steps(r.stdout)] == list(range(1, 13)), r.stdout
    assert "12 steps at 3 ranks: the same training" in r.stdout, r.stdout


def test_more_steps_than_the_script_trains(tmp_path):
    r = _verify(["--verify-steps", "500", "-np", "2", "--verify-dir", str(tmp_path / "kept")],
                [BN_SCRIPT, "1"])
    assert r.returncode == 0, r.stdout
    assert "the script trained 29 steps, fewer than the 500 asked" in r.stdout, r.stdout
    assert len(_steps(r.stdout)) == 29
    assert (tmp_path / "kept" / "reference" / "step-29.pickle").exists()  # --verify-dir keeps them
